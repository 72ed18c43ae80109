package main

// Query parsing and validation as Stele's routes do it (src/api/route-helpers.ts,
// src/api/ledger-reads.ts, src/http/request-rules.ts): node:querystring's parse (keys in
// first-seen order, a repeated key an array, '+' a space), then the same checks in the same
// order with the same codes and messages.

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

const maxQueryValue = 128

// apiError is Stele's JSON error shape with its status.
type apiError struct {
	status  int
	code    string
	message string
}

func badRequest(code, message string) *apiError { return &apiError{400, code, message} }
func notFound(code, message string) *apiError   { return &apiError{404, code, message} }

func (e *apiError) body() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]map[string]string{"error": {"code": e.code, "message": e.message}})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// jsonString is JSON.stringify of a string (no HTML escaping, as JavaScript does not).
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// query is a parsed query string: its keys in first-seen order, each key's values.
type query struct {
	keys   []string
	values map[string][]string
}

func unescape(s string) string {
	s = strings.ReplaceAll(s, "+", " ")
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// parseQuery parses raw as node:querystring does for the queries the routes take.
func parseQuery(raw string) (query, *apiError) {
	q := query{values: map[string][]string{}}
	if strings.Contains(raw, "%") {
		if u, err := url.PathUnescape(raw); err != nil || !utf8.ValidString(u) {
			return q, badRequest("bad_request", "the query has a malformed percent-encoding or is not UTF-8 once decoded")
		}
	}
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		k, v = unescape(k), unescape(v)
		if _, ok := q.values[k]; !ok {
			q.keys = append(q.keys, k)
		}
		q.values[k] = append(q.values[k], v)
	}
	return q, nil
}

// single is a parameter given at most once ("" and false when absent).
func (q query) single(name string) (string, bool, *apiError) {
	vs, ok := q.values[name]
	if !ok {
		return "", false, nil
	}
	if len(vs) > 1 {
		return "", false, badRequest("duplicate_parameter", name+" is given more than once")
	}
	if len([]rune(vs[0])) > maxQueryValue {
		return "", false, badRequest("invalid_"+name, name+" is too long")
	}
	return vs[0], true, nil
}

var treeSizePattern = regexp.MustCompile(`^(0|[1-9][0-9]{0,15})$`)

// treeSize is a required tree size or leaf index parameter.
func (q query) treeSize(name string) (int64, *apiError) {
	v, ok, e := q.single(name)
	if e != nil {
		return 0, e
	}
	if !ok {
		return 0, badRequest("missing_"+name, name+" is required")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if !treeSizePattern.MatchString(v) || err != nil || n > 1<<53-1 {
		return 0, badRequest("invalid_"+name, name+" must be a non-negative integer")
	}
	return n, nil
}

// unknownParameter refuses the first key not among allowed.
func (q query) unknownParameter(allowed ...string) *apiError {
	for _, k := range q.keys {
		known := false
		for _, a := range allowed {
			known = known || k == a
		}
		if !known {
			return badRequest("unknown_parameter", "unknown query parameter "+jsonString(k))
		}
	}
	return nil
}

var (
	entryIDPattern = regexp.MustCompile(`^led_(0|[1-9][0-9]{0,15})_([0-9a-f]{12})$`)
	hashPattern    = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	lookupKeys     = []string{"id", "artifact", "hash", "leaf"}
)

// lookupKey is the one lookup key of an /entry query.
func (q query) lookupKey() (string, *apiError) {
	var key string
	count := 0
	for _, k := range q.keys {
		isKey := false
		for _, l := range lookupKeys {
			isKey = isKey || k == l
		}
		if isKey {
			key = k
			count++
		} else if k != "format" {
			return "", badRequest("unknown_parameter", "unknown query parameter "+jsonString(k))
		}
	}
	if count != 1 {
		return "", badRequest("lookup_key", "give exactly one of id, artifact, hash or leaf")
	}
	return key, nil
}

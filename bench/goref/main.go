// goref is the read path's reference in Go (issue 36): GET /api/ledger/entry?id=…|hash=…
// and GET /api/ledger/consistency?first=…&second=… over a Stele log's tiles, read-only,
// with golang.org/x/mod/sumdb/tlog's TileHashReader, ProveRecord and ProveTree, answering
// the bytes Stele's server answers (test/interop/goref.test.ts compares them). Stele finds
// an entry by digest in its LMDB index; this reference builds that index in memory at start
// from the record bundles instead. The checkpoint view an entry answer embeds is given as a
// file (Stele's GET /api/ledger/checkpoint), checked to name the log's checkpoint tree.
//
//	goref -log <data-dir>/log -checkpoint-json <file> [-addr 127.0.0.1:0]
//
// It prints {"url":"http://host:port"} once listening, as `stele serve --json` does.
package main

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

const jsonType = "application/json; charset=utf-8"

type server struct {
	log            *logDir
	checkpointJSON []byte
	// rootHex is the checkpoint root in hex (an entry answer's rootHash).
	rootHex string
}

func main() {
	dir := flag.String("log", "", "the log's public objects (<data-dir>/log)")
	cpFile := flag.String("checkpoint-json", "", "the checkpoint view JSON (GET /api/ledger/checkpoint)")
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	if err := run(*dir, *cpFile, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "goref:", err)
		os.Exit(1)
	}
}

func run(dir, cpFile, addr string) error {
	l, err := openLog(dir)
	if err != nil {
		return err
	}
	cp, err := os.ReadFile(cpFile)
	if err != nil {
		return err
	}
	var view struct {
		TreeSize int64  `json:"treeSize"`
		RootHash string `json:"rootHash"`
	}
	if err := json.Unmarshal(cp, &view); err != nil {
		return fmt.Errorf("%s: %w", cpFile, err)
	}
	s := &server{log: l, checkpointJSON: cp, rootHex: hex.EncodeToString(l.tree.Hash[:])}
	if view.TreeSize != l.tree.N || view.RootHash != s.rootHex {
		return fmt.Errorf("%s names tree %d %s, the log's checkpoint %d %s", cpFile, view.TreeSize, view.RootHash, l.tree.N, s.rootHex)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Printf("{\"url\":\"http://%s\"}\n", ln.Addr())
	mux := http.NewServeMux()
	mux.HandleFunc("/api/ledger/entry", s.answer(s.entry))
	mux.HandleFunc("/api/ledger/consistency", s.answer(s.consistency))
	return http.Serve(ln, mux)
}

// answer runs a route on GET and writes its JSON or its error in Stele's shape.
func (s *server) answer(route func(q query) ([]byte, *apiError)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		e := &apiError{405, "method_not_allowed", r.Method + " is not allowed on " + r.URL.Path + "; use HEAD, GET"}
		if r.Method == http.MethodGet {
			q, qe := parseQuery(r.URL.RawQuery)
			if e = qe; e == nil {
				body, e = route(q)
			}
		}
		h := w.Header()
		h.Set("Content-Type", jsonType)
		h.Set("Cache-Control", "no-store")
		if e != nil {
			body = e.body()
			w.WriteHeader(e.status)
		}
		w.Write(body)
	}
}

func (s *server) entry(q query) ([]byte, *apiError) {
	if format, ok, e := q.single("format"); e != nil {
		return nil, e
	} else if ok && format == "tlog-proof" {
		return nil, badRequest("unsupported_format", "this reference answers format=json only")
	} else if ok && format != "json" {
		return nil, badRequest("invalid_format", "format must be json or tlog-proof")
	}
	key, e := q.lookupKey()
	if e != nil {
		return nil, e
	}
	value, _, e := q.single(key)
	if e != nil {
		return nil, e
	}
	var seq int64 = -1
	idPrefix := ""
	switch key {
	case "id":
		m := entryIDPattern.FindStringSubmatch(value)
		if m == nil {
			return nil, badRequest("invalid_id", "id must look like led_<leaf index>_<12 hex>")
		}
		n, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || n > 1<<53-1 {
			return nil, badRequest("invalid_id", "id must look like led_<leaf index>_<12 hex>")
		}
		seq, idPrefix = n, m[2]
	case "hash":
		if !hashPattern.MatchString(value) {
			return nil, badRequest("invalid_hash", "hash must be 64 hexadecimal characters")
		}
		if n, ok := s.log.byDigest[strings.ToLower(value)]; ok {
			seq = n
		}
	default:
		return nil, badRequest("unsupported_key", "this reference looks entries up by id or hash only")
	}
	if seq < 0 || seq >= s.log.tree.N {
		return nil, notFound("entry_not_found", "no published entry for "+key+"="+value)
	}
	record, eh, leaf, err := s.log.entryAt(seq)
	if err != nil {
		return nil, &apiError{500, "corrupt_storage", err.Error()}
	}
	ehHex := hex.EncodeToString(eh)
	if idPrefix != "" && !strings.HasPrefix(ehHex, idPrefix) {
		return nil, notFound("entry_not_found", fmt.Sprintf("entry %d exists but its hash does not start with %s", seq, idPrefix))
	}
	proof, err := tlog.ProveRecord(s.log.tree.N, seq, s.log.hashes)
	if err != nil {
		return nil, &apiError{500, "corrupt_storage", err.Error()}
	}
	b := make([]byte, 0, 2048+len(record)+len(s.checkpointJSON))
	b = append(b, `{"leafIndex":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"treeSize":`...)
	b = strconv.AppendInt(b, s.log.tree.N, 10)
	b = appendHex(append(b, `,"leafHash":`...), leaf[:])
	b = appendHexList(append(b, `,"auditPath":`...), proof)
	b = append(b, `,"rootHash":"`...)
	b = append(b, s.rootHex...)
	b = append(b, `","checkpoint":`...)
	b = append(b, s.checkpointJSON...)
	// The record is canonical JSON: its members are spliced between the id and the proof.
	b = append(b, `,"entry":{"id":"led_`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, '_')
	b = append(b, ehHex[:12]...)
	b = append(b, `",`...)
	b = append(b, record[1:len(record)-1]...)
	b = append(b, `,"proof":{"entryHash":"`...)
	b = append(b, ehHex...)
	return append(b, `"}}}`...), nil
}

func (s *server) consistency(q query) ([]byte, *apiError) {
	if e := q.unknownParameter("first", "second"); e != nil {
		return nil, e
	}
	first, e := q.treeSize("first")
	if e != nil {
		return nil, e
	}
	second, e := q.treeSize("second")
	if e != nil {
		return nil, e
	}
	if first < 1 {
		return nil, badRequest("invalid_first", "first must be at least 1")
	}
	if first > second {
		return nil, badRequest("invalid_range", "first must not exceed second")
	}
	if second > s.log.tree.N {
		return nil, badRequest("invalid_second", fmt.Sprintf("second exceeds the current tree size %d", s.log.tree.N))
	}
	firstRoot, err := tlog.TreeHash(first, s.log.hashes)
	if err != nil {
		return nil, &apiError{500, "corrupt_storage", err.Error()}
	}
	secondRoot := s.log.tree.Hash
	if second != s.log.tree.N {
		if secondRoot, err = tlog.TreeHash(second, s.log.hashes); err != nil {
			return nil, &apiError{500, "corrupt_storage", err.Error()}
		}
	}
	proof, err := tlog.ProveTree(second, first, s.log.hashes)
	if err != nil {
		return nil, &apiError{500, "corrupt_storage", err.Error()}
	}
	b := make([]byte, 0, 256+len(proof)*67)
	b = strconv.AppendInt(append(b, `{"first":`...), first, 10)
	b = strconv.AppendInt(append(b, `,"second":`...), second, 10)
	b = appendHex(append(b, `,"firstRoot":`...), firstRoot[:])
	b = appendHex(append(b, `,"secondRoot":`...), secondRoot[:])
	b = appendHexList(append(b, `,"proof":`...), proof)
	return append(b, '}'), nil
}

func appendHex(b, h []byte) []byte {
	n := len(b) + 1
	b = append(b, make([]byte, 2*len(h)+2)...)
	b[n-1] = '"'
	hex.Encode(b[n:], h)
	b[len(b)-1] = '"'
	return b
}

func appendHexList(b []byte, hs []tlog.Hash) []byte {
	b = append(b, '[')
	for i := range hs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendHex(b, hs[i][:])
	}
	return append(b, ']')
}

package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// errNotFound means the log has no object at that path (a partial tile may have been
// deleted once its full tile exists, docs/design.md §1.5).
var errNotFound = errors.New("not found")

// maxObject bounds what one read may return: the largest object is a 256-entry bundle of
// 65,537-byte framed entries, far above any Stele hash tile or entry bundle.
const maxObject = 256 * 65537

// source reads a log's objects by their path relative to the log prefix.
type source interface {
	get(path string) ([]byte, error)
}

func openSource(where string) source {
	if strings.HasPrefix(where, "http://") || strings.HasPrefix(where, "https://") {
		return &httpSource{base: strings.TrimRight(where, "/"), client: &http.Client{Timeout: 30 * time.Second}}
	}
	return dirSource{root: where}
}

type httpSource struct {
	base   string
	client *http.Client
}

func (s *httpSource) get(path string) ([]byte, error) {
	resp, err := s.client.Get(s.base + "/" + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%s: %w", path, errNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", path, resp.StatusCode)
	}
	return readLimited(resp.Body, path)
}

type dirSource struct{ root string }

func (s dirSource) get(path string) ([]byte, error) {
	// Paths are built by this program, never taken from the log; refuse anything odd anyway.
	if strings.Contains(path, "..") || filepath.IsAbs(path) {
		return nil, fmt.Errorf("refusing path %q", path)
	}
	f, err := os.Open(filepath.Join(s.root, filepath.FromSlash(path)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, errNotFound)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f, path)
}

func readLimited(r io.Reader, path string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxObject+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxObject {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxObject)
	}
	return b, nil
}

package main

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// checkpoint is a verified C2SP tlog-checkpoint body.
type checkpoint struct {
	origin string
	tree   tlog.Tree
	sigs   int // signatures by known keys (the log's)
	others int // signatures by keys this check does not hold (witness cosignatures)
}

// openCheckpoint verifies a signed note with x/mod's note.Open and parses its body: the
// origin, the decimal size and the base64 root, each on its own line, and nothing else
// (Stele writes no extension lines, docs/design.md §1.3). tlog.ParseTree is not used: it
// expects the Go checksum database's own first line.
func openCheckpoint(msg []byte, verifier note.Verifier, origin string) (checkpoint, error) {
	n, err := note.Open(msg, note.VerifierList(verifier))
	if err != nil {
		return checkpoint{}, fmt.Errorf("note.Open: %w", err)
	}
	lines := strings.Split(n.Text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		return checkpoint{}, fmt.Errorf("body has %d lines, want origin, size and root", len(lines)-1)
	}
	if lines[0] != origin {
		return checkpoint{}, fmt.Errorf("origin %q, want %q", lines[0], origin)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return checkpoint{}, fmt.Errorf("size %q is not a canonical decimal", lines[1])
	}
	root, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return checkpoint{}, fmt.Errorf("root %q is not 32 bytes of standard base64", lines[2])
	}
	var h tlog.Hash
	copy(h[:], root)
	return checkpoint{origin: lines[0], tree: tlog.Tree{N: size, Hash: h}, sigs: len(n.Sigs), others: len(n.UnverifiedSigs)}, nil
}

package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// ledgerAPI fetches Stele's JSON proofs (docs/interface.md §2.4, §2.5) to compare them, byte for byte,
// with the proofs Go's tlog computes from the tiles.
type ledgerAPI struct {
	base   string
	client *http.Client
}

func newLedgerAPI(base string) *ledgerAPI {
	return &ledgerAPI{base: base, client: &http.Client{Timeout: 30 * time.Second}}
}

type entryProof struct {
	LeafIndex int64    `json:"leafIndex"`
	TreeSize  int64    `json:"treeSize"`
	LeafHash  string   `json:"leafHash"`
	AuditPath []string `json:"auditPath"`
	RootHash  string   `json:"rootHash"`
	Entry     struct {
		ID    string `json:"id"`
		Proof struct {
			EntryHash string `json:"entryHash"`
		} `json:"proof"`
	} `json:"entry"`
}

type consistencyProof struct {
	First      int64    `json:"first"`
	Second     int64    `json:"second"`
	FirstRoot  string   `json:"firstRoot"`
	SecondRoot string   `json:"secondRoot"`
	Proof      []string `json:"proof"`
}

func (a *ledgerAPI) getJSON(path string, into interface{}) error {
	resp, err := a.client.Get(a.base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d %s", path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

// entryID is Stele's entry id, led_<seq>_<first 12 hex of entry_hash> (docs/design.md §1.4).
func entryID(seq int64, entryHash []byte) string {
	return fmt.Sprintf("led_%d_%s", seq, hex.EncodeToString(entryHash)[:12])
}

func (a *ledgerAPI) entry(seq int64, entryHash []byte) (entryProof, error) {
	var p entryProof
	err := a.getJSON("/api/ledger/entry?id="+entryID(seq, entryHash), &p)
	return p, err
}

func (a *ledgerAPI) consistency(first, second int64) (consistencyProof, error) {
	var p consistencyProof
	err := a.getJSON(fmt.Sprintf("/api/ledger/consistency?first=%d&second=%d", first, second), &p)
	return p, err
}

// sameHashes reports whether the API's hex list is exactly Go's proof, in order.
func sameHashes(api []string, proof []tlog.Hash) bool {
	if len(api) != len(proof) {
		return false
	}
	for i, h := range proof {
		if api[i] != hex.EncodeToString(h[:]) {
			return false
		}
	}
	return true
}

func hexHash(h tlog.Hash) string { return hex.EncodeToString(h[:]) }

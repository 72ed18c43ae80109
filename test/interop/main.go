// Command steleinterop reads a Stele log as any C2SP tlog-tiles client would, with nothing
// but Go's reference packages golang.org/x/mod/sumdb/note and golang.org/x/mod/sumdb/tlog,
// and prints one PASS or FAIL line per check:
//
//   - the checkpoint's signature (note.Open with the log's vkey) and body;
//   - every entry bundle, the root recomputed from them (tlog.StoredHashes, tlog.TreeHash),
//     and every hash tile of the tree against tlog.ReadTileData;
//   - the root again through tlog.TileHashReader over a C2SP tile reader;
//   - sampled inclusion proofs (tlog.ProveRecord, tlog.CheckRecord) through that reader;
//   - consistency with earlier checkpoints and sizes (tlog.ProveTree, tlog.CheckTree);
//   - with -api, Stele's JSON proofs against Go's, hash for hash.
//
// The last line is "steleinterop: N passed, M failed". Exit 0 only when M is 0, 1 when a
// check failed, 2 on bad flags.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// report prints and counts check results; at most maxFails FAIL lines per check name.
type report struct {
	passed, failed int
	quiet          bool
}

func (r *report) pass(format string, args ...interface{}) {
	r.passed++
	if !r.quiet {
		fmt.Printf("PASS "+format+"\n", args...)
	}
}

func (r *report) fail(format string, args ...interface{}) {
	r.failed++
	fmt.Printf("FAIL "+format+"\n", args...)
}

func (r *report) info(format string, args ...interface{}) {
	fmt.Printf("INFO "+format+"\n", args...)
}

func usage(msg string) {
	fmt.Fprintf(os.Stderr, "steleinterop: %s\n", msg)
	flag.Usage()
	os.Exit(2)
}

func main() {
	logAt := flag.String("log", "", "the log: its base URL (http://host:port, serving /checkpoint and /tile/...) or its directory")
	vkey := flag.String("vkey", "", "the log's verifier key, <name>+<hash>+<base64>")
	origin := flag.String("origin", "", "the expected origin line (default: the vkey's name)")
	api := flag.String("api", "", "the Stele server's base URL (serving /api/ledger/...), to compare its JSON proofs with Go's")
	samples := flag.Int("samples", 64, "inclusion proofs to check (the first and last leaf always)")
	seed := flag.Int64("seed", 1, "seed for choosing the sampled leaves and sizes")
	var oldCheckpoints, oldSizes listFlag
	flag.Var(&oldCheckpoints, "old", "an earlier checkpoint note (file) to prove consistency from; repeatable")
	flag.Var(&oldSizes, "old-size", "earlier tree sizes to prove consistency from, comma-separated; repeatable")
	quiet := flag.Bool("q", false, "print only FAIL lines and the summary")
	flag.Parse()
	if flag.NArg() != 0 {
		usage("unexpected argument " + strconv.Quote(flag.Arg(0)))
	}
	if *logAt == "" || *vkey == "" {
		usage("-log and -vkey are required")
	}
	verifier, err := note.NewVerifier(*vkey)
	if err != nil {
		usage("bad -vkey: " + err.Error())
	}
	if *origin == "" {
		*origin = verifier.Name()
	}
	var sizes []int64
	for _, list := range oldSizes {
		for _, s := range strings.Split(list, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil || n < 0 {
				usage("bad -old-size " + strconv.Quote(s))
			}
			sizes = append(sizes, n)
		}
	}

	r := &report{quiet: *quiet}
	c := &check{r: r, src: openSource(*logAt), verifier: verifier, origin: *origin, rng: rand.New(rand.NewSource(*seed))}
	if *api != "" {
		c.api = newLedgerAPI(strings.TrimRight(*api, "/"))
	}
	c.run(*samples, oldCheckpoints, sizes)
	fmt.Printf("steleinterop: %d passed, %d failed\n", r.passed, r.failed)
	if r.failed > 0 {
		os.Exit(1)
	}
}

type check struct {
	r        *report
	src      source
	api      *ledgerAPI
	verifier note.Verifier
	origin   string
	rng      *rand.Rand

	cp      checkpoint
	entries [][]byte    // entry_hash of every leaf, from the bundles
	stored  []tlog.Hash // every stored hash, recomputed from the entries
	tiles   *tileReader
	proofs  tlog.HashReader // authenticated reads through TileHashReader
}

// recomputed reads stored hashes from the in-memory recomputation.
func (c *check) recomputed() tlog.HashReader {
	return tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, x := range indexes {
			if x < 0 || x >= int64(len(c.stored)) {
				return nil, fmt.Errorf("stored hash %d is beyond the recomputed tree", x)
			}
			out[i] = c.stored[x]
		}
		return out, nil
	})
}

func (c *check) run(samples int, oldCheckpoints []string, oldSizes []int64) {
	if !c.checkpoint() {
		return
	}
	full := c.fullRecomputation()
	c.tiles = &tileReader{src: c.src}
	c.proofs = tlog.TileHashReader(c.cp.tree, c.tiles)
	c.rootThroughTiles()
	c.inclusion(samples, full)
	c.consistency(oldCheckpoints, oldSizes, full)
	if c.tiles.fallbacks > 0 {
		c.r.info("%d partial tiles were absent and read from their full tile", c.tiles.fallbacks)
	}
}

func (c *check) checkpoint() bool {
	msg, err := c.src.get("checkpoint")
	if err != nil {
		c.r.fail("checkpoint: %v", err)
		return false
	}
	cp, err := openCheckpoint(msg, c.verifier, c.origin)
	if err != nil {
		c.r.fail("checkpoint signature and body: %v", err)
		return false
	}
	c.cp = cp
	c.r.pass("checkpoint signature (note.Open with %s): size %d, root %s, %d other signature(s)", c.verifier.Name(), cp.tree.N, hexHash(cp.tree.Hash), cp.others)
	return true
}

// fullRecomputation reads every entry bundle, recomputes the tree with tlog.StoredHashes,
// compares its root with the signed one, and every hash tile with tlog.ReadTileData.
// It reports whether the recomputed hashes can be used as the reference later on.
func (c *check) fullRecomputation() bool {
	size := c.cp.tree.N
	entries, err := readEntryHashes(c.src, size)
	if err != nil {
		c.r.fail("entry bundles: %v", err)
		return false
	}
	c.entries = entries
	c.stored = make([]tlog.Hash, 0, 2*size)
	for i, e := range entries {
		hs, err := tlog.StoredHashes(int64(i), e, c.recomputed())
		if err != nil {
			c.r.fail("recomputing leaf %d: %v", i, err)
			return false
		}
		c.stored = append(c.stored, hs...)
	}
	root, err := tlog.TreeHash(size, c.recomputed())
	if err != nil {
		c.r.fail("root of the entry bundles: %v", err)
		return false
	}
	if root != c.cp.tree.Hash {
		c.r.fail("root of the entry bundles: %s from %d entries, checkpoint says %s", hexHash(root), size, hexHash(c.cp.tree.Hash))
		return false
	}
	c.r.pass("root of the entry bundles (tlog.TreeHash over %d leaves) equals the signed root", size)

	bad, count := 0, 0
	for _, t := range treeTiles(size) {
		count++
		want, err := tlog.ReadTileData(t, c.recomputed())
		if err != nil {
			c.r.fail("tile %s: %v", hashTilePath(t.L, t.N, t.W), err)
			bad++
			continue
		}
		got, err := c.src.get(hashTilePath(t.L, t.N, t.W))
		if err != nil || !bytes.Equal(got, want) {
			if bad < 10 {
				why := "differs from the hashes recomputed from the entries"
				if err != nil {
					why = err.Error()
				}
				c.r.fail("tile %s: %s", hashTilePath(t.L, t.N, t.W), why)
			}
			bad++
		}
	}
	if bad == 0 {
		c.r.pass("hash tiles: all %d equal tlog.ReadTileData of the recomputed tree", count)
	} else {
		c.r.fail("hash tiles: %d of %d differ", bad, count)
	}
	return true
}

func (c *check) rootThroughTiles() {
	root, err := tlog.TreeHash(c.cp.tree.N, c.proofs)
	if err != nil {
		c.r.fail("root through tlog.TileHashReader: %v", err)
		return
	}
	if root != c.cp.tree.Hash {
		c.r.fail("root through tlog.TileHashReader: %s, checkpoint says %s", hexHash(root), hexHash(c.cp.tree.Hash))
		return
	}
	c.r.pass("root through tlog.TileHashReader equals the signed root")
}

// leaves picks the first and last leaf and up to n-2 others at random, in order.
func (c *check) leaves(n int) []int64 {
	size := c.cp.tree.N
	if size == 0 {
		return nil
	}
	chosen := map[int64]bool{0: true, size - 1: true}
	for len(chosen) < n && int64(len(chosen)) < size {
		chosen[c.rng.Int63n(size)] = true
	}
	out := make([]int64, 0, len(chosen))
	for i := range chosen {
		out = append(out, i)
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

func (c *check) inclusion(samples int, full bool) {
	size, root := c.cp.tree.N, c.cp.tree.Hash
	ok, picked := 0, c.leaves(samples)
	for _, i := range picked {
		// The leaf hash: from its entry bundle when the bundles were read, else from the tile.
		var leaf tlog.Hash
		if full {
			leaf = tlog.RecordHash(c.entries[i])
		} else {
			hs, err := c.proofs.ReadHashes([]int64{tlog.StoredHashIndex(0, i)})
			if err != nil {
				c.r.fail("inclusion %d: reading its leaf hash: %v", i, err)
				continue
			}
			leaf = hs[0]
		}
		proof, err := tlog.ProveRecord(size, i, c.proofs)
		if err != nil {
			c.r.fail("inclusion %d: tlog.ProveRecord: %v", i, err)
			continue
		}
		if err := tlog.CheckRecord(proof, size, root, i, leaf); err != nil {
			c.r.fail("inclusion %d: tlog.CheckRecord: %v", i, err)
			continue
		}
		if c.api != nil && full && !c.apiInclusion(i, leaf, proof) {
			continue
		}
		ok++
	}
	if ok == len(picked) {
		how := ""
		if c.api != nil {
			how = ", and the API's auditPath equals Go's proof"
		}
		c.r.pass("inclusion: %d leaves proved with tlog.ProveRecord/CheckRecord through the tiles%s", ok, how)
	}
}

func (c *check) apiInclusion(i int64, leaf tlog.Hash, proof tlog.RecordProof) bool {
	got, err := c.api.entry(i, c.entries[i])
	if err != nil {
		c.r.fail("inclusion %d: API: %v", i, err)
		return false
	}
	if got.TreeSize != c.cp.tree.N {
		c.r.info("inclusion %d: the API answered for size %d, not %d (the log grew); not compared", i, got.TreeSize, c.cp.tree.N)
		return true
	}
	wantID := entryID(i, c.entries[i])
	switch {
	case got.LeafIndex != i:
		c.r.fail("inclusion %d: API leafIndex %d", i, got.LeafIndex)
	case got.LeafHash != hexHash(leaf):
		c.r.fail("inclusion %d: API leafHash %s, Go %s", i, got.LeafHash, hexHash(leaf))
	case got.RootHash != hexHash(c.cp.tree.Hash):
		c.r.fail("inclusion %d: API rootHash %s, signed %s", i, got.RootHash, hexHash(c.cp.tree.Hash))
	case got.Entry.ID != wantID || got.Entry.Proof.EntryHash != fmt.Sprintf("%x", c.entries[i]):
		c.r.fail("inclusion %d: API entry id %s / entryHash %s, bundle says %s", i, got.Entry.ID, got.Entry.Proof.EntryHash, wantID)
	case !sameHashes(got.AuditPath, proof):
		c.r.fail("inclusion %d: API auditPath differs from tlog.ProveRecord's proof", i)
	default:
		return true
	}
	return false
}

func (c *check) consistency(files []string, sizes []int64, full bool) {
	for _, f := range files {
		msg, err := os.ReadFile(f)
		if err != nil {
			c.r.fail("consistency from %s: %v", f, err)
			continue
		}
		old, err := openCheckpoint(msg, c.verifier, c.origin)
		if err != nil {
			c.r.fail("consistency from %s: %v", f, err)
			continue
		}
		c.proveTree(old.tree, "old checkpoint "+f)
	}
	for _, n := range sizes {
		if !full {
			c.r.fail("consistency from size %d: needs the recomputed tree, which failed", n)
			continue
		}
		if n > c.cp.tree.N {
			c.r.fail("consistency from size %d: beyond the checkpoint's size %d", n, c.cp.tree.N)
			continue
		}
		root, err := tlog.TreeHash(n, c.recomputed())
		if err != nil {
			c.r.fail("consistency from size %d: %v", n, err)
			continue
		}
		c.proveTree(tlog.Tree{N: n, Hash: root}, "size "+strconv.FormatInt(n, 10))
	}
}

func (c *check) proveTree(old tlog.Tree, what string) {
	cur := c.cp.tree
	if old.N > cur.N || old.N == 0 {
		c.r.fail("consistency %d->%d (%s): not an earlier non-empty tree", old.N, cur.N, what)
		return
	}
	proof, err := tlog.ProveTree(cur.N, old.N, c.proofs)
	if err != nil {
		c.r.fail("consistency %d->%d (%s): tlog.ProveTree: %v", old.N, cur.N, what, err)
		return
	}
	if err := tlog.CheckTree(proof, cur.N, cur.Hash, old.N, old.Hash); err != nil {
		c.r.fail("consistency %d->%d (%s): tlog.CheckTree: %v", old.N, cur.N, what, err)
		return
	}
	if c.api != nil {
		got, err := c.api.consistency(old.N, cur.N)
		switch {
		case err != nil:
			c.r.fail("consistency %d->%d (%s): API: %v", old.N, cur.N, what, err)
			return
		case got.FirstRoot != hexHash(old.Hash) || got.SecondRoot != hexHash(cur.Hash):
			c.r.fail("consistency %d->%d (%s): API roots %s, %s differ from Go's", old.N, cur.N, what, got.FirstRoot, got.SecondRoot)
			return
		case !sameHashes(got.Proof, proof):
			c.r.fail("consistency %d->%d (%s): API proof differs from tlog.ProveTree's", old.N, cur.N, what)
			return
		}
	}
	c.r.pass("consistency %d->%d (%s): tlog.ProveTree/CheckTree", old.N, cur.N, what)
}

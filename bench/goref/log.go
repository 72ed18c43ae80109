package main

// The log as the reference reads it: the C2SP tiles of a local log directory, read-only.
// Hash tiles go through x/mod's TileHashReader, which authenticates every tile it uses
// against the checkpoint's root; the tiles are kept in a per-tile cache (as Stele's reader
// keeps them). Entry and record bundles are read once at start, each record checked to
// hash to its entry hash (Stele's entry_hash chain); an entry hash is checked against its
// authenticated leaf on every answer.

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/tlog"
)

const tileHeight = 8
const tileWidth = 1 << tileHeight

var entryDomain = []byte("stele/entry/v1\n")

// indexPath writes a tile index in groups of three digits, all but the last prefixed "x".
func indexPath(n int64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/%s", n%1000, s)
	}
	return s
}

// tilePath is where C2SP keeps a tile: kind is a level ("0", "1", …) or "entries"/"records".
func tilePath(kind string, n int64, width int) string {
	p := "tile/" + kind + "/" + indexPath(n)
	if width < tileWidth {
		p += ".p/" + strconv.Itoa(width)
	}
	return p
}

// logDir is a local log's public objects.
type logDir struct {
	dir string
	// tree is the checkpoint's size and root.
	tree tlog.Tree
	// hashes reads (authenticated) stored hashes of tree.
	hashes tlog.HashReader
	// entries and records: item i of bundle n is leaf n*256+i.
	entries [][][]byte
	records [][][]byte
	// byDigest: the first leaf whose record carries each digest (the index Stele keeps in LMDB).
	byDigest map[string]int64
}

// read returns an object's content: record bundles are stored gzip-compressed (Stele writes
// them so, a CDN serves them so), recognised by gzip's magic bytes.
func (l *logDir) read(rel string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(l.dir, filepath.FromSlash(rel)))
	if err != nil || len(data) < 3 || data[0] != 0x1f || data[1] != 0x8b || data[2] != 0x08 {
		return data, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	// A bundle holds at most 256 items of at most 65,535 bytes, each after a 2-byte length.
	return io.ReadAll(io.LimitReader(zr, 256*(2+65535)+1))
}

// readCheckpoint parses the tree of the log's checkpoint note (origin, size, base64 root).
func (l *logDir) readCheckpoint() error {
	note, err := l.read("checkpoint")
	if err != nil {
		return err
	}
	lines := strings.SplitN(string(note), "\n", 4)
	if len(lines) < 4 {
		return errors.New("checkpoint: too few lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		return fmt.Errorf("checkpoint size: %w", err)
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize {
		return fmt.Errorf("checkpoint root %q", lines[2])
	}
	l.tree.N = size
	copy(l.tree.Hash[:], root)
	return nil
}

// tileKey names a tile whatever its width: the widest authenticated one is kept.
type tileKey struct {
	level int
	n     int64
}

// tileRows is an authenticated tile: its stored hashes (row 0) and the interior hashes above
// them (row r holds width>>r hashes), computed once, as Stele's HashTile keeps them.
type tileRows struct {
	data []byte
	rows [tileHeight + 1][]tlog.Hash
}

func newTileRows(data []byte) *tileRows {
	t := &tileRows{data: data}
	row := make([]tlog.Hash, len(data)/tlog.HashSize)
	for i := range row {
		copy(row[i][:], data[i*tlog.HashSize:])
	}
	t.rows[0] = row
	for r := 1; r <= tileHeight; r++ {
		below := t.rows[r-1]
		up := make([]tlog.Hash, len(below)/2)
		for i := range up {
			up[i] = tlog.NodeHash(below[2*i], below[2*i+1])
		}
		t.rows[r] = up
	}
	return t
}

// tileCache holds the hash tiles TileHashReader has authenticated, each read from disk once.
// As Stele's reader does, a tile is authenticated on its first use and trusted after: a
// read whose hashes are all in cached tiles is answered from them, any other goes through
// TileHashReader, which checks what it reads against the checkpoint's root.
type tileCache struct {
	log    *logDir
	mu     sync.RWMutex
	tiles  map[tileKey]*tileRows
	verify tlog.HashReader
}

func newTileCache(l *logDir) *tileCache {
	c := &tileCache{log: l, tiles: map[tileKey]*tileRows{}}
	c.verify = tlog.TileHashReader(l.tree, c)
	return c
}

func (c *tileCache) cached(k tileKey) *tileRows {
	c.mu.RLock()
	t := c.tiles[k]
	c.mu.RUnlock()
	return t
}

// ReadHashes is a tlog.HashReader over the cache, falling back to TileHashReader.
func (c *tileCache) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		level, n := tlog.SplitStoredHashIndex(x)
		r := level % tileHeight
		shift := tileHeight - r
		t := c.cached(tileKey{level / tileHeight, n >> shift})
		pos := int(n & (1<<shift - 1))
		if t == nil || pos >= len(t.rows[r]) {
			return c.verify.ReadHashes(indexes)
		}
		out[i] = t.rows[r][pos]
	}
	return out, nil
}

func (c *tileCache) Height() int { return tileHeight }

func (c *tileCache) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		if cached := c.cached(tileKey{t.L, t.N}); cached != nil && len(cached.data) >= t.W*tlog.HashSize {
			out[i] = cached.data[:t.W*tlog.HashSize]
			continue
		}
		data, err := c.log.read(tilePath(strconv.Itoa(t.L), t.N, t.W))
		if err != nil {
			return nil, err
		}
		if len(data) != t.W*tlog.HashSize {
			return nil, fmt.Errorf("tile %d/%d: %d bytes, want %d", t.L, t.N, len(data), t.W*tlog.HashSize)
		}
		out[i] = data
	}
	return out, nil
}

// SaveTiles is called with tiles TileHashReader has authenticated: those are the ones kept.
func (c *tileCache) SaveTiles(tiles []tlog.Tile, data [][]byte) {
	c.mu.Lock()
	for i, t := range tiles {
		k := tileKey{t.L, t.N}
		if had := c.tiles[k]; had == nil || len(data[i]) > len(had.data) {
			c.tiles[k] = newTileRows(data[i])
		}
	}
	c.mu.Unlock()
}

// splitBundle splits a bundle into its items (2-byte big-endian length, then the bytes).
func splitBundle(data []byte, width int, name string) ([][]byte, error) {
	items := make([][]byte, 0, width)
	for len(items) < width {
		if len(data) < 2 {
			return nil, fmt.Errorf("%s: ends after %d of %d items", name, len(items), width)
		}
		n := int(binary.BigEndian.Uint16(data))
		if len(data) < 2+n {
			return nil, fmt.Errorf("%s: item %d is cut", name, len(items))
		}
		items = append(items, data[2:2+n])
		data = data[2+n:]
	}
	return items, nil
}

// entryHash is Stele's entry_hash: SHA-256(domain ‖ seq as u64 BE ‖ record ‖ prior).
func entryHash(seq int64, record, prior []byte) []byte {
	h := sha256.New()
	h.Write(entryDomain)
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], uint64(seq))
	h.Write(s[:])
	h.Write(record)
	h.Write(prior)
	return h.Sum(nil)
}

// openLog reads the checkpoint and every bundle of its tree, checking the entry_hash chain.
func openLog(dir string) (*logDir, error) {
	l := &logDir{dir: dir, byDigest: map[string]int64{}}
	if err := l.readCheckpoint(); err != nil {
		return nil, err
	}
	l.hashes = newTileCache(l)
	prior := make([]byte, tlog.HashSize)
	for n := int64(0); n*tileWidth < l.tree.N; n++ {
		width := tileWidth
		if rest := l.tree.N - n*tileWidth; rest < tileWidth {
			width = int(rest)
		}
		var kinds [2][][]byte
		for k, kind := range []string{"entries", "records"} {
			data, err := l.read(tilePath(kind, n, width))
			if errors.Is(err, os.ErrNotExist) && width < tileWidth {
				data, err = l.read(tilePath(kind, n, tileWidth))
			}
			if err != nil {
				return nil, err
			}
			if kinds[k], err = splitBundle(data, width, tilePath(kind, n, width)); err != nil {
				return nil, err
			}
		}
		for i, record := range kinds[1] {
			seq := n*tileWidth + int64(i)
			if !bytes.Equal(entryHash(seq, record, prior), kinds[0][i]) {
				return nil, fmt.Errorf("record %d does not hash to its entry hash", seq)
			}
			prior = kinds[0][i]
			var r struct {
				Digest string `json:"digest"`
			}
			if err := json.Unmarshal(record, &r); err != nil {
				return nil, fmt.Errorf("record %d: %w", seq, err)
			}
			if _, ok := l.byDigest[r.Digest]; !ok {
				l.byDigest[r.Digest] = seq
			}
		}
		l.entries = append(l.entries, kinds[0])
		l.records = append(l.records, kinds[1])
	}
	return l, nil
}

// entryAt is leaf seq's record and entry hash, the entry hash checked against its
// authenticated leaf hash, and the leaf hash.
func (l *logDir) entryAt(seq int64) (record, eh []byte, leaf tlog.Hash, err error) {
	eh = l.entries[seq/tileWidth][seq%tileWidth]
	record = l.records[seq/tileWidth][seq%tileWidth]
	got, err := l.hashes.ReadHashes([]int64{tlog.StoredHashIndex(0, seq)})
	if err != nil {
		return nil, nil, leaf, err
	}
	leaf = got[0]
	if tlog.RecordHash(eh) != leaf {
		return nil, nil, leaf, fmt.Errorf("entry %d does not match its leaf hash", seq)
	}
	return record, eh, leaf, nil
}

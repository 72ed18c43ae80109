package main

import (
	"errors"
	"fmt"
	"strconv"

	"golang.org/x/mod/sumdb/tlog"
)

// tileHeight is C2SP tlog-tiles' fixed height: 256 hashes per tile.
const tileHeight = 8

// indexPath writes a tile index in groups of three digits, every group but the last
// prefixed with "x": 5 -> 005, 1234067 -> x001/x234/067.
func indexPath(n int64) string {
	s := fmt.Sprintf("%03d", n%1000)
	for n >= 1000 {
		n /= 1000
		s = fmt.Sprintf("x%03d/%s", n%1000, s)
	}
	return s
}

// hashTilePath is where C2SP keeps a hash tile. It differs from x/mod's Tile.Path, which
// was written for the Go checksum database: no height segment, and level -1 is "entries".
func hashTilePath(level int, n int64, width int) string {
	p := "tile/" + strconv.Itoa(level) + "/" + indexPath(n)
	if width < 1<<tileHeight {
		p += ".p/" + strconv.Itoa(width)
	}
	return p
}

func bundlePath(n int64, width int) string {
	p := "tile/entries/" + indexPath(n)
	if width < 1<<tileHeight {
		p += ".p/" + strconv.Itoa(width)
	}
	return p
}

// treeTiles lists the hash tiles a tree of this size has: at each level its full tiles
// and, when the level's hash count is not a multiple of 256, one partial tile.
// (tlog.NewTiles answers another question: every tile written while a tree grows.)
func treeTiles(size int64) []tlog.Tile {
	var tiles []tlog.Tile
	for level, n := 0, size; n > 0; level, n = level+1, n>>tileHeight {
		for i := int64(0); i < n>>tileHeight; i++ {
			tiles = append(tiles, tlog.Tile{H: tileHeight, L: level, N: i, W: 1 << tileHeight})
		}
		if w := int(n % (1 << tileHeight)); w > 0 {
			tiles = append(tiles, tlog.Tile{H: tileHeight, L: level, N: n >> tileHeight, W: w})
		}
	}
	return tiles
}

// tileReader hands x/mod's TileHashReader the C2SP hash tiles of a log. TileHashReader
// authenticates what it reads against the tree's signed root, so this reader only fetches.
type tileReader struct {
	src source
	// fallbacks counts partial tiles that were gone and were cut from their full tile.
	fallbacks int
}

func (r *tileReader) Height() int { return tileHeight }

func (r *tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		if t.H != tileHeight || t.L < 0 {
			return nil, fmt.Errorf("unexpected tile request %+v", t)
		}
		want := t.W * tlog.HashSize
		data, err := r.src.get(hashTilePath(t.L, t.N, t.W))
		if errors.Is(err, errNotFound) && t.W < 1<<tileHeight {
			data, err = r.src.get(hashTilePath(t.L, t.N, 1<<tileHeight))
			if err == nil && len(data) >= want {
				data = data[:want]
				r.fallbacks++
			}
		}
		if err != nil {
			return nil, err
		}
		if len(data) != want {
			return nil, fmt.Errorf("%s: %d bytes, want %d", hashTilePath(t.L, t.N, t.W), len(data), want)
		}
		out[i] = data
	}
	return out, nil
}

// SaveTiles is where a caching client would keep verified tiles; this check keeps none.
func (r *tileReader) SaveTiles([]tlog.Tile, [][]byte) {}

// readEntryHashes reads every entry bundle of a tree of the given size and returns the
// entry_hash of each leaf. A bundle frames each entry as a 2-byte big-endian length and
// its bytes; Stele's leaf input is the 32-byte entry_hash (docs/design.md §1.1, §1.2).
func readEntryHashes(src source, size int64) ([][]byte, error) {
	hashes := make([][]byte, 0, size)
	for n := int64(0); n*256 < size; n++ {
		width := 256
		if rest := size - n*256; rest < 256 {
			width = int(rest)
		}
		data, err := src.get(bundlePath(n, width))
		if errors.Is(err, errNotFound) && width < 256 {
			data, err = src.get(bundlePath(n, 256))
		}
		if err != nil {
			return nil, err
		}
		for i := 0; i < width; i++ {
			if len(data) < 2 {
				return nil, fmt.Errorf("%s: ends after %d of %d entries", bundlePath(n, width), i, width)
			}
			length := int(data[0])<<8 | int(data[1])
			if length != tlog.HashSize || len(data) < 2+length {
				return nil, fmt.Errorf("%s: entry %d is %d bytes, want a 32-byte entry_hash", bundlePath(n, width), i, length)
			}
			hashes = append(hashes, data[2:2+length])
			data = data[2+length:]
		}
		if width == 256 && len(data) != 0 {
			return nil, fmt.Errorf("%s: %d bytes after the last entry", bundlePath(n, width), len(data))
		}
	}
	return hashes, nil
}

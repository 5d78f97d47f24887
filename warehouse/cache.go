package warehouse

import (
	"container/list"
	"sync"
	"unsafe"
)

// Decoded columns of sealed blocks are kept in a bounded cache, least recently used out
// first (ClickHouse's uncompressed cache, in spirit): blocks never change, so a dashboard
// that asks the same questions again reads columns from memory instead of decompressing
// and decoding them each time.

// ColumnCacheBytes bounds the decoded columns one warehouse file keeps in memory.
var ColumnCacheBytes int64 = 256 << 20

type colKey struct {
	model string
	block uint64
	name  string
}

type colCache struct {
	mu    sync.Mutex
	used  int64
	items map[colKey]*list.Element
	lru   list.List
}

type cacheEntry struct {
	key  colKey
	col  *Column
	size int64
}

func (cc *colCache) get(k colKey) *Column {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if e, ok := cc.items[k]; ok {
		cc.lru.MoveToFront(e)
		return e.Value.(*cacheEntry).col
	}
	return nil
}

func (cc *colCache) put(k colKey, c *Column) {
	size := c.memSize()
	if size > ColumnCacheBytes/4 {
		return
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.items == nil {
		cc.items = map[colKey]*list.Element{}
	}
	if _, ok := cc.items[k]; ok {
		return
	}
	cc.items[k] = cc.lru.PushFront(&cacheEntry{key: k, col: c, size: size})
	cc.used += size
	for cc.used > ColumnCacheBytes {
		last := cc.lru.Back()
		e := last.Value.(*cacheEntry)
		cc.lru.Remove(last)
		delete(cc.items, e.key)
		cc.used -= e.size
	}
}

// memSize approximates the memory a decoded column holds.
func (c *Column) memSize() int64 {
	n := int64(len(c.Nulls)*8 + len(c.Codes)*4 + len(c.Ints)*8 + len(c.Floats)*8)
	for _, s := range c.Dict {
		n += int64(len(s)) + int64(unsafe.Sizeof(s))
	}
	for _, s := range c.Strs {
		n += int64(len(s)) + int64(unsafe.Sizeof(s))
	}
	return n + 128
}

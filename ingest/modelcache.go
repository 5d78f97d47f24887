package ingest

import (
	"bufio"
	"io"
	"sync"
	"sync/atomic"

	"lookout/store"
	"lookout/warehouse"
)

// modelCache keeps what resolve reads from the control plane for each (project, model key)
// — the model, its record validator and its warehouse — for one runtime generation of the
// store (store.RuntimeGeneration): every write to models, warehouses or projects starts a
// new one, so an archived or changed model counts from the very next request. Only models
// that exist are kept, and a caller only reaches the lookup with a schema its client
// lists, so the cache holds at most the configured models.
type modelCache struct{ cur atomic.Pointer[modelGen] }

type modelGen struct {
	gen    uint64
	models sync.Map // projectID + "\x00" + key -> *resolvedModel
}

// resolvedModel is shared by every request of its generation: read it, never change it.
type resolvedModel struct {
	model     store.Model
	validator *warehouse.RecordValidator
	warehouse store.Warehouse
	watched   []string // the fields whose spans the validator reports (WatchFields)
}

// model returns a project's model by key with its validator and warehouse. The generation
// is read before the records, so records read during a concurrent write are kept under
// the older generation and dropped at once. Returns not_found.
func (s *Service) model(projectID, key string) (*resolvedModel, error) {
	gen := s.store.RuntimeGeneration()
	g := s.models.cur.Load()
	if g == nil || g.gen != gen {
		fresh := &modelGen{gen: gen}
		if g == nil || g.gen < gen {
			s.models.cur.CompareAndSwap(g, fresh)
		}
		g = fresh
	}
	ck := projectID + "\x00" + key
	if v, ok := g.models.Load(ck); ok {
		return v.(*resolvedModel), nil
	}
	m, err := s.store.ModelByKey(projectID, key)
	if err != nil {
		return nil, err
	}
	wh, err := s.store.Warehouse(projectID, m.WarehouseID)
	if err != nil {
		return nil, err
	}
	rm := &resolvedModel{model: m, warehouse: wh}
	rm.validator = warehouse.NewValidator(&rm.model)
	if s.WatchFields != nil {
		if rm.watched = s.WatchFields(projectID, key); len(rm.watched) > 0 {
			rm.validator = rm.validator.Watching(rm.watched)
		}
	}
	g.models.Store(ck, rm)
	return rm, nil
}

// bodyReaders recycles the NDJSON decoder's 256 KiB read buffers: allocating and zeroing
// one per request was the largest single cost of a one-record request. The decoder adopts
// a *bufio.Reader of at least its size as is (bufio.NewReaderSize).
var bodyReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bodyBuffer) }}

// bodyBuffer is the NDJSON decoder's read buffer size.
const bodyBuffer = 256 << 10

// pooledReader wraps body in a recycled buffered reader; release returns it to the pool.
// Nothing may keep a slice of a line read through it after release: Ingest releases it
// when it returns, after every chunk has been committed (records are copied into the
// request's own buffers by the validator).
func pooledReader(body io.Reader) (*bufio.Reader, func()) {
	br := bodyReaders.Get().(*bufio.Reader)
	br.Reset(body)
	return br, func() {
		br.Reset(nil)
		bodyReaders.Put(br)
	}
}

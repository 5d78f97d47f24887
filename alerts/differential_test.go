package alerts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"lookout/cond"
	"lookout/store"
	"lookout/warehouse"
)

// TestEvaluatorDifferential checks the evaluator's fast paths (values from the
// validator's spans or from its own scan, alerts found by eq value and by numeric band,
// each value parsed once) against a naive evaluation written independently here: decode
// each record with encoding/json and ask every condition of every alert. Random records
// (with missing and null fields, numbers of several spellings, both timestamp forms) and
// random alerts, several seeds.
func TestEvaluatorDifferential(t *testing.T) {
	fields := []store.Field{{Name: "s", Type: "string"}, {Name: "c", Type: "string"}, {Name: "n", Type: "number"},
		{Name: "i", Type: "integer"}, {Name: "b", Type: "boolean"}, {Name: "t", Type: "timestamp"}}
	pools := map[string][]any{
		"s": {"a", "b", "ab", "ba", "", "x y", "é\"q"},
		"c": {"NL", "DE", "FR"},
		"n": {-1.5, 0, 0.5, 1, 2.25, 10, 100, json.Number("1.0"), json.Number("1e2")},
		"i": {-3, 0, 1, 2, 5, 100},
		"b": {true, false},
		"t": {"2026-11-21T12:00:00Z", "2026-11-21T13:00:00.5Z", "2026-11-20T00:00:00+02:00", 1763726400000},
	}
	typeOf := map[string]string{}
	for _, f := range fields {
		typeOf[f.Name] = f.Type
	}
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			f := newFixture(t)
			if _, err := f.st.CreateModel(f.project, store.ModelInput{Key: ptr("m"), Fields: &fields}); err != nil {
				t.Fatal(err)
			}
			pick := func(name string) any { p := pools[name]; return p[rng.IntN(len(p))] }
			var made []store.Alert
			for len(made) < 40 {
				var conds []store.AlertCondition
				for range 1 + rng.IntN(3) {
					fl := fields[rng.IntN(len(fields))]
					ops := cond.OperatorsFor(fl.Type)
					op := ops[rng.IntN(len(ops))]
					c := store.AlertCondition{Field: fl.Name, Operator: op}
					switch {
					case cond.TakesList(op):
						c.Value = []any{pick(fl.Name), pick(fl.Name)}
					case op == cond.OpMatches:
						c.Value = []string{"^a", "b$", "^$", "[ée]"}[rng.IntN(4)]
					case cond.TakesValue(op):
						c.Value = pick(fl.Name)
					}
					conds = append(conds, c)
				}
				group := []string{}
				for _, g := range []string{"c", "b", "i"} {
					if rng.IntN(3) == 0 {
						group = append(group, g)
					}
				}
				match := []string{"all", "any"}[rng.IntN(2)]
				a, err := f.svc.CreateAlert(f.project, store.AlertInput{Name: ptr("a"), ModelKey: ptr("m"), Conditions: &conds, GroupBy: &group, Match: &match})
				if err != nil {
					continue // a value the operator does not take: fine, draw again
				}
				made = append(made, a)
			}
			// Records: each field present (from its pool), null, or missing.
			var recs [][]byte
			m, err := f.st.ModelByKey(f.project, "m")
			if err != nil {
				t.Fatal(err)
			}
			watched := f.svc.WatchedFields(f.project, "m")
			v := warehouse.NewValidator(&m).Watching(watched)
			var spans []warehouse.Span
			var decoded []map[string]any
			for len(recs) < 400 {
				obj := map[string]any{}
				for _, fl := range fields {
					switch rng.IntN(5) {
					case 0:
					case 1:
						obj[fl.Name] = nil
					default:
						obj[fl.Name] = pick(fl.Name)
					}
				}
				raw, _ := json.Marshal(obj)
				var rec []byte
				var errs []store.FieldError
				rec, spans, errs = v.ValidateSpans(raw, nil, spans)
				if len(errs) > 0 {
					t.Fatalf("%s: %v", raw, errs)
				}
				recs = append(recs, rec)
				d := json.NewDecoder(bytes.NewReader(rec))
				d.UseNumber()
				var dm map[string]any
				if err := d.Decode(&dm); err != nil {
					t.Fatal(err)
				}
				decoded = append(decoded, dm)
			}

			// The naive evaluation.
			want := map[string]int64{}
			for _, a := range made {
				var cs []*cond.Condition
				for _, c := range a.Conditions {
					cc, err := cond.Compile(typeOf[c.Field], c.Operator, c.Value)
					if err != nil {
						t.Fatal(err)
					}
					cs = append(cs, cc)
				}
				for _, dm := range decoded {
					all, some := true, false
					for j, c := range a.Conditions {
						ok := cs[j].Match(dm[c.Field])
						all, some = all && ok, some || ok
					}
					if (a.Match == "all" && all) || (a.Match == "any" && some) {
						g := map[string]any{}
						for _, name := range a.GroupBy {
							g[name] = dm[name]
						}
						want[a.ID+" "+canonicalGroup(t, g)]++
					}
				}
			}

			for _, mode := range []string{"spans", "scan"} {
				b := Batch{ProjectID: f.project, ModelKey: "m", ReceivedAt: f.clock.Now(), ClientID: "ic_d", Records: recs}
				if mode == "spans" {
					b.Watched, b.Spans = watched, spans
				}
				f.svc.Match(b)
				got := map[string]int64{}
				for id, pg := range f.svc.eval.take() {
					var g map[string]any
					d := json.NewDecoder(bytes.NewReader([]byte(id.group)))
					d.UseNumber()
					if err := d.Decode(&g); err != nil {
						t.Fatal(err)
					}
					got[id.alertID+" "+canonicalGroup(t, g)] += pg.count
				}
				if len(got) != len(want) {
					t.Errorf("%s: %d groups matched, the naive evaluation %d", mode, len(got), len(want))
				}
				for k, n := range want {
					if got[k] != n {
						t.Errorf("%s: %s: %d matches, the naive evaluation %d", mode, k, got[k], n)
					}
				}
			}
		})
	}
}

// canonicalGroup encodes a group with numbers compared by value.
func canonicalGroup(t *testing.T, g map[string]any) string {
	for k, v := range g {
		if n, ok := v.(json.Number); ok {
			f, err := n.Float64()
			if err != nil {
				t.Fatal(err)
			}
			g[k] = f
		}
	}
	b, _ := json.Marshal(g)
	return string(b)
}

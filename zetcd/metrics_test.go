package zetcd

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zetcd/zetcd/encoding"
)

// TestMetricsSessionLabelsEachRequest: the etcd round trips of each request are counted under
// its own op (OpLabel on the context the store gets), request after request, also when the
// requests come with another context; and labeling a request allocates nothing.
func TestMetricsSessionLabelsEachRequest(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	inner := Forward(nil, func(ctx context.Context, op encoding.Op, _ encoding.Record) (encoding.Record, encoding.Zxid, error) {
		seen = append(seen, OpLabel(ctx))
		resp, _ := encoding.NewResponse(op)
		return resp, 1, nil
	})
	s := newMetricsSession(inner, m)
	ctx := context.Background()
	other := context.WithValue(ctx, struct{ k int }{}, 1)
	steps := []struct {
		ctx context.Context
		op  encoding.Op
	}{
		{ctx, encoding.OpGetData}, {ctx, encoding.OpSetData}, {other, encoding.OpGetData},
		{other, encoding.OpSync}, {ctx, encoding.OpExists},
	}
	for i, st := range steps {
		if _, _, err := dispatchTable[st.op](st.ctx, s, mustRequest(t, st.op)); err != nil {
			t.Fatal(err)
		}
		if got, want := seen[i], st.op.String(); got != want {
			t.Errorf("request %d (%v): round trips counted under %q, want %q", i, st.op, got, want)
		}
		if st.ctx == other && s.labeled.Value(struct{ k int }{}) != 1 {
			t.Errorf("request %d: the labeled context is not made from the request's", i)
		}
	}
	if OpLabel(ctx) != OpLabelOther {
		t.Errorf("an unlabeled context: %q, want %q", OpLabel(ctx), OpLabelOther)
	}
	if n := testing.AllocsPerRun(100, func() { s.withLabel(ctx, encoding.OpGetData) }); n != 0 {
		t.Errorf("labeling a request allocates %v times, want 0", n)
	}
}

func mustRequest(t *testing.T, op encoding.Op) encoding.Record {
	t.Helper()
	r, ok := encoding.NewRequest(op)
	if !ok {
		t.Fatalf("no request record for %v", op)
	}
	return r
}

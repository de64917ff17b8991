package itest

import (
	"bufio"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// GetOK gets url and fails the test unless the answer is 200 OK; the caller closes its body.
func GetOK(t *testing.T, url string) *http.Response {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	return resp
}

// Scrape reads a Prometheus text exposition from url into "name{k="v",...}" → value, with the
// labels sorted by name; histogram buckets are kept as their own series.
func Scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp := GetOK(t, url)
	defer resp.Body.Close()
	out := map[string]float64{}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		line := s.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[CanonicalSeries(line[:i])] = v
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// CanonicalSeries sorts the labels of a series name (label values hold no commas here).
func CanonicalSeries(series string) string {
	name, labels, ok := strings.Cut(series, "{")
	if !ok {
		return series
	}
	parts := strings.Split(strings.TrimSuffix(labels, "}"), ",")
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

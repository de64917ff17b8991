package testenv

import (
	"errors"
	"testing"
)

// Must fails the test on an error other than the ones allowed (errors.Is).
func Must(t testing.TB, err error, allowed ...error) {
	t.Helper()
	for _, a := range allowed {
		if errors.Is(err, a) {
			return
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

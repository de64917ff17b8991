package itest

import "testing"

// ReportViolations fails the test with the first few violations of a check and their number.
func ReportViolations(t *testing.T, check string, violations []string) {
	t.Helper()
	for i, v := range violations {
		if i == 10 {
			t.Errorf("... %d violations of %s in all", len(violations), check)
			break
		}
		t.Errorf("%s: %s", check, v)
	}
}

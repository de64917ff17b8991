//go:build race

package encoding

const raceEnabled = true

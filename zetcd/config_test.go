package zetcd

import (
	"testing"
	"time"

	"github.com/zetcd/zetcd/encoding"
)

func TestServerDefaults(t *testing.T) {
	cfg := Config{}.withDefaults()
	if cfg.MinSessionTimeout != 4*time.Second || cfg.MaxSessionTimeout != 40*time.Second ||
		cfg.MaxFrameBytes != encoding.DefaultMaxFrameBytes || cfg.Logger == nil || cfg.Version == "" {
		t.Errorf("defaults %+v", cfg)
	}
	if cfg := (Config{MinSessionTimeout: time.Minute}).withDefaults(); cfg.MaxSessionTimeout != time.Minute {
		t.Errorf("max below min: got max %v", cfg.MaxSessionTimeout)
	}
}

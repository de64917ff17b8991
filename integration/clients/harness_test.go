package clients

import "github.com/zetcd/zetcd/internal/testkit/testenv"

// startEtcd is short for the shared test environment's (internal/testkit/testenv).
var startEtcd = testenv.StartEtcd

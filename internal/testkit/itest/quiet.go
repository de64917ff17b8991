package itest

// QuietLogger is a go-zookeeper logger that drops everything.
type QuietLogger struct{}

// Printf drops its arguments.
func (QuietLogger) Printf(string, ...any) {}

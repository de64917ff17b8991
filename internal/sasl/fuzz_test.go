package sasl

import (
	"bytes"
	"testing"
)

// FuzzDigestMD5: any client tokens end an exchange with an answer or an error, never a panic,
// and only a response carrying the right digest completes it.
func FuzzDigestMD5(f *testing.F) {
	f.Add([]byte{}, []byte(`charset=utf-8,username="bob",realm="zk-sasl-md5",nonce="n",nc=00000001,cnonce="c",digest-uri="zookeeper/zk-sasl-md5",maxbuf=65536,response=0123,qop=auth`))
	f.Add([]byte("x"), []byte(`a="\"",b=,,c`))
	f.Add([]byte{}, []byte("maxbuf=big,nonce-count=zz"))
	f.Fuzz(func(t *testing.T, first, second []byte) {
		d := testConfig.NewDigestMD5()
		if _, err := d.Step(first); err != nil {
			return
		}
		rsp, err := d.Step(second)
		if err == nil && (!d.Complete() || !bytes.HasPrefix(rsp, []byte("rspauth="))) {
			t.Fatalf("accepted %q: complete %v, answer %q", second, d.Complete(), rsp)
		}
		if err != nil && d.Complete() {
			t.Fatalf("complete after an error")
		}
	})
}

// FuzzDirectives: the parser never panics, and what it returns holds only known keys.
func FuzzDirectives(f *testing.F) {
	f.Add([]byte(`realm="zk-sasl-md5",nonce="abc",charset=utf-8,algorithm=md5-sess`))
	f.Add([]byte(" \r\n a = 1 , ,, B=\"x\\\"y\\\\\" ,\tc=\"\""))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := parseDirectives(b, responseKeys)
		if err != nil {
			return
		}
		for k := range d {
			known := false
			for _, r := range responseKeys {
				known = known || r == k
			}
			if !known {
				t.Fatalf("unknown key %q", k)
			}
		}
	})
}

// FuzzJAAS: the JAAS parser never panics.
func FuzzJAAS(f *testing.F) {
	f.Add(`Server { org.apache.zookeeper.server.auth.DigestLoginModule required user_bob="b\"x" /* c */ user_a=b; }; // x`)
	f.Add(`Server {`)
	f.Fuzz(func(t *testing.T, text string) {
		j, err := ParseJAAS(text)
		if err != nil {
			return
		}
		for name := range j {
			_, _ = j.ServerUsers(name)
		}
	})
}

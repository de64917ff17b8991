package sasl

import (
	"fmt"
	"os"
	"strings"
)

// A JAAS login configuration file, as the JDK's ConfigFile reads it and ZooKeeper operators
// write it:
//
//	Server {
//	    org.apache.zookeeper.server.auth.DigestLoginModule required
//	    user_super="adminsecret"
//	    user_kafka="kafkasecret";
//	};
//	Client { ... };
//
// Sections of login modules, each module a class name, a control flag and name=value options
// (values quoted or bare), ending with ';'. Comments are // to the end of the line and /* */.
// ${property} expansion is not supported.

// LoginModule is one entry of a JAAS section.
type LoginModule struct {
	Class   string
	Flag    string // required, requisite, sufficient or optional
	Options map[string]string
}

// JAAS is a parsed configuration file: its sections by name.
type JAAS map[string][]LoginModule

// DigestLoginModule is the class of ZooKeeper's DIGEST-MD5 login module.
const DigestLoginModule = "org.apache.zookeeper.server.auth.DigestLoginModule"

// ReadJAAS reads and parses a JAAS file.
func ReadJAAS(path string) (JAAS, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	j, err := ParseJAAS(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return j, nil
}

// ServerUsers returns the DIGEST-MD5 users of section (ZooKeeper's "Server" unless
// zookeeper.sasl.serverconfig names another), as SaslServerCallbackHandler collects them: every
// option user_<name> of every module of the section. A section with a Kerberos login module
// asks for GSSAPI, which is not supported.
func (j JAAS) ServerUsers(section string) (map[string]string, error) {
	mods, ok := j[section]
	if !ok {
		return nil, fmt.Errorf("could not find a '%s' entry in the JAAS configuration", section)
	}
	users := map[string]string{}
	for _, m := range mods {
		if strings.Contains(m.Class, "Krb5LoginModule") {
			return nil, fmt.Errorf("section %s: %s asks for GSSAPI (Kerberos), which zetcd does not support; use %s", section, m.Class, DigestLoginModule)
		}
		for k, v := range m.Options {
			if name, ok := strings.CutPrefix(k, "user_"); ok {
				users[name] = v
			}
		}
	}
	return users, nil
}

// ParseJAAS parses the text of a JAAS file.
func ParseJAAS(text string) (JAAS, error) {
	toks, err := jaasTokens(text)
	if err != nil {
		return nil, err
	}
	p := &jaasParser{toks: toks}
	out := JAAS{}
	for !p.done() {
		name, err := p.word("a section name")
		if err != nil {
			return nil, err
		}
		if err := p.expect("{"); err != nil {
			return nil, err
		}
		var mods []LoginModule
		for !p.peek("}") {
			m, err := p.module()
			if err != nil {
				return nil, fmt.Errorf("section %s: %w", name, err)
			}
			mods = append(mods, m)
		}
		p.next()
		if err := p.expect(";"); err != nil {
			return nil, fmt.Errorf("section %s: %w", name, err)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("section %s given twice", name)
		}
		out[name] = mods
	}
	return out, nil
}

type jaasToken struct {
	text   string
	quoted bool
	line   int
}

type jaasParser struct {
	toks []jaasToken
	i    int
}

func (p *jaasParser) done() bool { return p.i >= len(p.toks) }

func (p *jaasParser) peek(punct string) bool {
	return !p.done() && !p.toks[p.i].quoted && p.toks[p.i].text == punct
}

func (p *jaasParser) next() jaasToken { t := p.toks[p.i]; p.i++; return t }

func (p *jaasParser) where() string {
	if p.done() {
		return "at the end of the file"
	}
	return fmt.Sprintf("on line %d", p.toks[p.i].line)
}

func (p *jaasParser) expect(punct string) error {
	if !p.peek(punct) {
		return fmt.Errorf("expected %q %s", punct, p.where())
	}
	p.next()
	return nil
}

func (p *jaasParser) word(what string) (string, error) {
	if p.done() || p.toks[p.i].quoted || isJAASPunct(p.toks[p.i].text) {
		return "", fmt.Errorf("expected %s %s", what, p.where())
	}
	return p.next().text, nil
}

func (p *jaasParser) module() (LoginModule, error) {
	class, err := p.word("a login module class")
	if err != nil {
		return LoginModule{}, err
	}
	flag, err := p.word("a control flag")
	if err != nil {
		return LoginModule{}, err
	}
	switch strings.ToLower(flag) {
	case "required", "requisite", "sufficient", "optional":
	default:
		return LoginModule{}, fmt.Errorf("%s: invalid control flag %q", class, flag)
	}
	m := LoginModule{Class: class, Flag: strings.ToLower(flag), Options: map[string]string{}}
	for !p.peek(";") {
		key, err := p.word("an option name or ';'")
		if err != nil {
			return LoginModule{}, fmt.Errorf("%s: %w", class, err)
		}
		if err := p.expect("="); err != nil {
			return LoginModule{}, fmt.Errorf("%s: option %s: %w", class, key, err)
		}
		if p.done() || (!p.toks[p.i].quoted && isJAASPunct(p.toks[p.i].text)) {
			return LoginModule{}, fmt.Errorf("%s: option %s: expected a value %s", class, key, p.where())
		}
		m.Options[key] = p.next().text
	}
	p.next()
	return m, nil
}

func isJAASPunct(s string) bool { return s == "{" || s == "}" || s == ";" || s == "=" }

// jaasTokens splits text into words, quoted strings and the punctuation { } ; =.
func jaasTokens(text string) ([]jaasToken, error) {
	var out []jaasToken
	line := 1
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			i++
		case strings.HasPrefix(text[i:], "//"):
			for i < len(text) && text[i] != '\n' {
				i++
			}
		case strings.HasPrefix(text[i:], "/*"):
			end := strings.Index(text[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated comment", line)
			}
			line += strings.Count(text[i:i+2+end], "\n")
			i += 2 + end + 2
		case c == '{' || c == '}' || c == ';' || c == '=':
			out = append(out, jaasToken{text: string(c), line: line})
			i++
		case c == '"':
			start := line
			var b strings.Builder
			i++
			for {
				if i >= len(text) {
					return nil, fmt.Errorf("line %d: unterminated quoted string", start)
				}
				if text[i] == '"' {
					i++
					break
				}
				if text[i] == '\\' && i+1 < len(text) {
					i++
				}
				if text[i] == '\n' {
					line++
				}
				b.WriteByte(text[i])
				i++
			}
			out = append(out, jaasToken{text: b.String(), quoted: true, line: start})
		default:
			start := i
			for i < len(text) && !strings.ContainsRune(" \t\r\f\n{};=\"", rune(text[i])) && !strings.HasPrefix(text[i:], "//") && !strings.HasPrefix(text[i:], "/*") {
				i++
			}
			out = append(out, jaasToken{text: text[start:i], line: line})
		}
	}
	return out, nil
}

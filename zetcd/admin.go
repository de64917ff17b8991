package zetcd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"go.uber.org/zap"
)

// The AdminServer: ZooKeeper 3.9's HTTP interface to its commands (JettyAdminServer, Commands),
// served by Server.AdminHandler. GET /commands lists the commands as HTML links; GET or POST
// /commands/<name> runs one, by its name or an alias, and answers a JSON object in ZooKeeper's
// member names, order and value types, with "command" (the command's name) and "error" (null,
// or why it failed) in every answer. The figures are the four-letter words' (fourletter.go):
// both interfaces read them through commandRun. A command with no zetcd meaning (leader,
// observers, voting_view, zabstate, hash) answers what a standalone ZooKeeper answers.
//
// Status codes are ZooKeeper's: 200, also for an unknown command (with an error); 401 and 403
// for a command that needs authentication (adminAuth); 503 when the backend cannot say (the
// store unreachable) and for snapshot and restore, which zetcd answers as a ZooKeeper with
// them disabled; 500 for a command asked with the method it does not take (ZooKeeper fails
// there without an answer of its own; zetcd answers JSON).

// AdminConfig configures Server.AdminHandler.
type AdminConfig struct {
	// ClientPort is the plain client port, which configuration reports; -1 for none.
	ClientPort int
	// Authorizer checks the identity of the commands that need one (snapshot, restore); nil
	// refuses every identity (401).
	Authorizer AdminAuthorizer
	// Properties are added to system_properties: the settings of this AdminServer and of the
	// server in ZooKeeper's system property names ("zookeeper.admin.serverPort").
	Properties map[string]string
}

// AdminAuthResult is what an AdminAuthorizer decides.
type AdminAuthResult int

const (
	// AdminAuthorized: the identity holds every permission on "/".
	AdminAuthorized AdminAuthResult = iota
	// AdminNotAuthenticated: no provider of the scheme, or the provider refused the identity
	// (401).
	AdminNotAuthenticated
	// AdminNotAuthorized: the identity is known but lacks a permission on "/" (403).
	AdminNotAuthorized
)

// AdminAuthorizer is ZooKeeper's check for the AdminServer commands that need authentication
// (Commands' AuthRequest(Perms.ALL, "/")): the identities the request's Authorization header
// ("<scheme> <auth>") gives through scheme's provider must hold every permission in the ACL
// of "/". An error means the store could not be asked.
type AdminAuthorizer interface {
	AuthorizeAdmin(ctx context.Context, scheme string, auth []byte) (AdminAuthResult, error)
}

// adminCommand is one command of the AdminServer.
type adminCommand struct {
	names []string // the name, then the aliases (Commands)
	post  bool     // served on POST (restore); every other command on GET
	auth  bool     // needs an authorized identity (adminAuth)
	run   func(r *adminRun) (status int, fields []field)
}

// adminRun is one AdminServer command being answered.
type adminRun struct {
	commandRun
	req *http.Request
	cfg *AdminConfig
}

// adminHandler serves the AdminServer for one Server.
type adminHandler struct {
	s      *Server
	cfg    AdminConfig
	byName map[string]*adminCommand
}

// AdminHandler returns the handler of ZooKeeper's AdminServer for s, to be served on its own
// port (ZooKeeper's admin.serverPort).
func (s *Server) AdminHandler(cfg AdminConfig) http.Handler {
	h := &adminHandler{s: s, cfg: cfg, byName: map[string]*adminCommand{}}
	for i := range adminCommands {
		for _, n := range adminCommands[i].names {
			h.byName[n] = &adminCommands[i]
		}
	}
	return h
}

func (h *adminHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	// Methods as ZooKeeper's servlet takes them, on any path: HEAD as GET without the body
	// (net/http drops it), OPTIONS with the methods allowed, others but GET and POST 405.
	method := req.Method
	switch method {
	case http.MethodGet, http.MethodPost:
	case http.MethodHead:
		method = http.MethodGet
	case http.MethodOptions:
		w.Header().Set("Allow", "GET, HEAD, POST, OPTIONS")
		return
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	name, ok := strings.CutPrefix(req.URL.Path, "/commands")
	if !ok || (name != "" && name[0] != '/') {
		http.NotFound(w, req)
		return
	}
	name = strings.TrimPrefix(name, "/")
	if name == "" {
		h.list(w)
		return
	}
	cmd := h.byName[name]
	if cmd == nil {
		h.answer(w, http.StatusOK, name, failure(name, "Unknown command: "+name))
		return
	}
	if cmd.auth {
		if status, msg := h.authorize(req); status != http.StatusOK {
			h.answer(w, status, cmd.names[0], failure(cmd.names[0], msg))
			return
		}
	}
	if cmd.post != (method == http.MethodPost) {
		h.answer(w, http.StatusInternalServerError, cmd.names[0],
			failure(cmd.names[0], fmt.Sprintf("%s does not take %s", cmd.names[0], method)))
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), fourLetterTimeout)
	defer cancel()
	r := &adminRun{
		commandRun: commandRun{s: h.s, ctx: ctx, warn: h.s.log.Warn, port: h.cfg.ClientPort, what: "admin command"},
		req:        req,
		cfg:        &h.cfg,
	}
	status, fields := cmd.run(r)
	h.answer(w, status, cmd.names[0], fields)
}

// list answers GET /commands: a link to every command by its name, sorted, as ZooKeeper lists
// them.
func (h *adminHandler) list(w http.ResponseWriter) {
	names := make([]string, 0, len(adminCommands))
	for _, c := range adminCommands {
		names = append(names, c.names[0])
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "<a href=\"/commands/%s\">%s</a>\n<br/>\n", n, n)
	}
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprint(w, b.String())
}

// authorize checks the Authorization header of a command that needs one, as ZooKeeper does:
// missing, 401 "Auth info is missing for the command"; a scheme without a provider or an
// identity it refuses, 401 "Not authenticated"; an identity without every permission on "/",
// 403 "Not authorized".
func (h *adminHandler) authorize(req *http.Request) (status int, msg string) {
	header := req.Header.Get("Authorization")
	if header == "" {
		return http.StatusUnauthorized, "Auth info is missing for the command"
	}
	scheme, auth, ok := strings.Cut(header, " ")
	if !ok || h.cfg.Authorizer == nil {
		return http.StatusUnauthorized, "Not authenticated"
	}
	ctx, cancel := context.WithTimeout(req.Context(), fourLetterTimeout)
	defer cancel()
	res, err := h.cfg.Authorizer.AuthorizeAdmin(ctx, scheme, []byte(auth))
	if err != nil {
		h.s.log.Warn("admin command: cannot check the identity", zap.String("scheme", scheme), zap.Error(err))
		return http.StatusServiceUnavailable, strings.TrimSuffix(notServing, "\n")
	}
	switch res {
	case AdminAuthorized:
		return http.StatusOK, ""
	case AdminNotAuthorized:
		return http.StatusForbidden, "Not authorized"
	}
	return http.StatusUnauthorized, "Not authenticated"
}

// failure is the answer to a command that was not run: its name, then why.
func failure(command, msg string) []field {
	return []field{{"command", command}, {"error", msg}}
}

// answer writes a command's JSON answer: fields, then "command" and "error" (null) unless
// fields hold them. A command that fails lists its error before the name, as ZooKeeper's do;
// one that was not run (failure) lists the name first.
func (h *adminHandler) answer(w http.ResponseWriter, status int, command string, fields []field) {
	obj := jsonObject(fields)
	if !obj.has("command") {
		obj = append(obj, field{"command", command})
	}
	if !obj.has("error") {
		obj = append(obj, field{"error", nil})
	}
	body, err := json.Marshal(obj)
	if err != nil {
		h.s.log.Error("admin command: answer not encodable", zap.String("command", command), zap.Error(err))
		status, body = http.StatusInternalServerError, []byte(`{"command":"`+command+`","error":"answer not encodable"}`)
	}
	var out bytes.Buffer
	if json.Indent(&out, body, "", "  ") != nil {
		out.Reset()
		out.Write(body)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	out.WriteTo(w)
}

// jsonObject is a JSON object whose members keep their order (ZooKeeper's answers list them in
// a fixed order). A float64 member is written as Java writes a double: always with a fraction.
type jsonObject []field

func (o jsonObject) has(key string) bool {
	for _, f := range o {
		if f.key == key {
			return true
		}
	}
	return false
}

func (o jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		if d, ok := f.val.(float64); ok {
			b.WriteString(javaDouble(d))
			continue
		}
		v, err := json.Marshal(f.val)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.key, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

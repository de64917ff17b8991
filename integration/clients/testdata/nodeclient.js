// nodeclient.js ADDRS [move]: node-zookeeper-client (pure JavaScript, a protocol implementation
// of its own). Each line it prints is an outcome a user of the client relies on; the Go test
// (nodeclient_test.go) wants the same lines from zetcd, xchk and ZooKeeper.
//
// The client registers a watch when the reply that sets it arrives, so a watch event sent
// before that reply is dropped: the pipelined step shows the order of the frames.
//
// move: a session sets a data, an exists and a child watch, prints "ready <session id>" and
// waits for a line on stdin while the test stops the server it is on; the client resumes the
// session on another server and sends its watches again (setWatches); another session then
// changes the nodes, and each watch must fire exactly once.
'use strict';

const crypto = require('crypto');
const zookeeper = require('node-zookeeper-client');

const addr = process.argv[2];
const root = '/nd';
const openACL = zookeeper.ACL.OPEN_ACL_UNSAFE;

// connect opens a session and resolves once it is connected.
function connect() {
    return new Promise((resolve, reject) => {
        const c = zookeeper.createClient(addr, { sessionTimeout: 10000, spinDelay: 100, retries: 0 });
        const timer = setTimeout(() => reject(new Error('connect: no session within 20 s')), 20000);
        c.once('connected', () => {
            clearTimeout(timer);
            resolve(c);
        });
        c.connect();
    });
}

// call runs c[method](...args, callback) and resolves with the callback's results.
function call(c, method, ...args) {
    return new Promise((resolve, reject) => {
        c[method](...args, (err, ...results) => (err ? reject(err) : resolve(results)));
    });
}

// code runs c[method](...args) and resolves with the ZooKeeper error's name, or OK.
async function code(c, method, ...args) {
    try {
        await call(c, method, ...args);
        return 'OK';
    } catch (e) {
        if (e instanceof zookeeper.Exception) {
            return e.getName();
        }
        throw e;
    }
}

// watcher returns a watcher function and a promise of its event as "TYPE path", which fails
// after 10 s.
function watcher() {
    let fire;
    const event = new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no watch event within 10 s')), 10000);
        fire = (ev) => {
            clearTimeout(timer);
            resolve(`${ev.getName()} ${ev.getPath()}`);
        };
    });
    return { fire: (ev) => fire(ev), event };
}

// closeClient closes c's session and resolves once the server has answered and closed the
// connection: the client sends closeSession and does not wait, and a program that exited at
// once could take the connection down before the server has read the request.
function closeClient(c) {
    return new Promise((resolve) => {
        const timer = setTimeout(resolve, 5000);
        c.once('disconnected', () => {
            clearTimeout(timer);
            resolve();
        });
        c.close();
    });
}

function digest(user, password) {
    return `${user}:${crypto.createHash('sha1').update(`${user}:${password}`).digest('base64')}`;
}

async function removeTree(c, path) {
    try {
        await call(c, 'removeRecursive', path, -1);
    } catch (e) {
        if (!(e instanceof zookeeper.Exception) || e.getName() !== 'NO_NODE') {
            throw e;
        }
    }
}

async function main() {
    const a = await connect();
    const b = await connect();
    await removeTree(b, root);

    // Modes and sequential names.
    await call(a, 'create', root, Buffer.from('r'), openACL, zookeeper.CreateMode.PERSISTENT);
    const [e] = await call(a, 'create', `${root}/e`, Buffer.from('0'), openACL, zookeeper.CreateMode.EPHEMERAL);
    const seq = [];
    for (let i = 0; i < 3; i++) {
        const [name] = await call(a, 'create', `${root}/s-`, null, openACL, zookeeper.CreateMode.PERSISTENT_SEQUENTIAL);
        seq.push(name);
    }
    console.log(`create ${e} ${seq.join(' ')}`);
    const [children, stat] = await call(b, 'getChildren', root);
    console.log(`getChildren ${children.sort().join(',')} numChildren=${stat.numChildren} cversion=${stat.cversion}`);

    // One-shot watches set by reads, fired by the other session's writes.
    const data = watcher();
    const [value] = await call(a, 'getData', e, data.fire);
    await call(b, 'setData', e, Buffer.from('1'), -1);
    console.log(`data watch ${value} ${await data.event}`);
    const exist = watcher();
    const [missing] = await call(a, 'exists', `${root}/x`, exist.fire);
    await call(b, 'create', `${root}/x`, null, openACL, zookeeper.CreateMode.PERSISTENT);
    console.log(`exists watch ${missing} ${await exist.event}`);

    // Pipelined: the getChildren that sets a watch and the create that fires it go out
    // together; the reply must come before the event, the event before the create's reply.
    // The client registers the watch as it reads the reply, so the event arrives at all only
    // if it came after the reply. The client may hand a reply to its callback later than the
    // frames after it (the event among them), so only the event's place before the create's
    // reply is recorded: the reply comes after the event's frame, so its callback does too.
    const order = [];
    const child = watcher();
    const listed = call(a, 'getChildren', root, (ev) => {
        order.push('event');
        child.fire(ev);
    });
    const created = call(a, 'create', `${root}/p`, null, openACL, zookeeper.CreateMode.PERSISTENT)
        .then(() => order.push('create'));
    await Promise.all([listed, created]);
    console.log(`pipelined ${await child.event} order=${order.join(',')}`);

    // 50 creates in flight complete in the order sent.
    const done = [];
    const inFlight = [];
    for (let i = 0; i < 50; i++) {
        inFlight.push(call(a, 'create', `${root}/f${i}`, null, openACL, zookeeper.CreateMode.PERSISTENT).then(() => done.push(i)));
    }
    await Promise.all(inFlight);
    console.log(`inFlight ${done.length} inOrder=${done.every((v, i) => v === i)}`);

    // Errors.
    console.log([
        'errors',
        await code(b, 'setData', e, Buffer.from('2'), 7),
        await code(b, 'remove', root, -1),
        await code(b, 'create', e, null, openACL, zookeeper.CreateMode.PERSISTENT),
        await code(b, 'getData', `${root}/none`),
        await code(b, 'create', `${e}/child`, null, openACL, zookeeper.CreateMode.PERSISTENT),
    ].join(' '));

    // A transaction that fails on its last op changes nothing; one that holds applies all.
    const tx = a.transaction()
        .create(`${root}/t`, Buffer.from('t'), openACL, zookeeper.CreateMode.PERSISTENT)
        .setData(e, Buffer.from('3'), -1)
        .check(`${root}/x`, 5);
    const failed = await new Promise((resolve) => tx.commit((err, results) => resolve({ err, results })));
    const [afterFailed] = await call(b, 'exists', `${root}/t`);
    console.log(`transaction failing: ${failed.err.getName()} [${failed.results.map((r) => r.err).join(',')}] t=${afterFailed !== null}`);
    const held = await new Promise((resolve) => a.transaction()
        .create(`${root}/t`, Buffer.from('t'), openACL, zookeeper.CreateMode.PERSISTENT)
        .setData(e, Buffer.from('3'), -1)
        .remove(`${root}/x`, -1)
        .commit((err, results) => resolve({ err, results })));
    console.log(`transaction holding: ${held.err === undefined || held.err === null} [${held.results.map((r) => r.type).join(',')}]`);

    // Digest auth and ACLs.
    a.addAuthInfo('digest', Buffer.from('alice:pw'));
    const alice = [new zookeeper.ACL(zookeeper.Permission.ALL, new zookeeper.Id('digest', digest('alice', 'pw')))];
    await call(a, 'create', `${root}/secret`, Buffer.from('s'), alice, zookeeper.CreateMode.PERSISTENT);
    const [secret] = await call(a, 'getData', `${root}/secret`);
    const [acls] = await call(a, 'getACL', `${root}/secret`);
    const other = [await code(b, 'getData', `${root}/secret`), await code(b, 'getACL', `${root}/secret`), await code(b, 'setData', `${root}/secret`, Buffer.from('b'), -1)];
    console.log(`acl owner=${secret} other=${other.join(',')} acl=${acls.map((x) => `${x.id.scheme}:${x.id.id}=${x.permission}`).join(',')}`);
    await call(a, 'remove', `${root}/secret`, -1);

    // Closing a session removes its ephemeral node and fires the other session's watch.
    const gone = watcher();
    await call(b, 'exists', e, gone.fire);
    a.close();
    console.log(`close ${await gone.event}`);
    await removeTree(b, root);
    await closeClient(b);
}

// move is the move mode (see the top).
async function move() {
    const a = await connect();
    const id = a.getSessionId().toString('hex');
    await removeTree(a, '/ndm');
    await call(a, 'create', '/ndm', null, openACL, zookeeper.CreateMode.PERSISTENT);
    await call(a, 'create', '/ndm/d', Buffer.from('0'), openACL, zookeeper.CreateMode.PERSISTENT);
    const events = [];
    const seen = (ev) => events.push(`${ev.getName()} ${ev.getPath()}`);
    await call(a, 'getData', '/ndm/d', seen);
    await call(a, 'exists', '/ndm/x', seen);
    await call(a, 'getChildren', '/ndm', seen);
    const states = [];
    a.on('disconnected', () => states.push('disconnected'));
    const resumed = new Promise((resolve) => a.on('connected', () => {
        states.push('connected');
        resolve();
    }));
    console.log(`ready ${id}`);
    await new Promise((resolve) => process.stdin.once('data', resolve));
    await resumed;
    const b = await connect();
    await call(b, 'setData', '/ndm/d', Buffer.from('1'), -1);
    await call(b, 'create', '/ndm/x', null, openACL, zookeeper.CreateMode.PERSISTENT);
    for (let waited = 0; events.length < 3 && waited < 10000; waited += 50) {
        await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await new Promise((resolve) => setTimeout(resolve, 500)); // an event twice would come by now
    console.log(`move sameSession=${a.getSessionId().toString('hex') === id} states=${states.join(',')} events=${events.sort().join(',')}`);
    await removeTree(b, '/ndm');
    await closeClient(a);
    await closeClient(b);
}

(process.argv[3] === 'move' ? move() : main()).then(() => process.exit(0), (err) => {
    console.error(err && err.stack ? err.stack : err);
    process.exit(1);
});

// codecell JavaScript driver: runs inside the jail, one Node process per kernel.
//
// File descriptors (set up by the server, see internal/kernel):
//   3  requests from the server (length-prefixed JSON frames)
//   4  frames to the server (length-prefixed JSON frames)
//   5  read end of the pipe that is this process's fd 1
//   6  read end of the pipe that is this process's fd 2
// Whatever user code writes to the console, process.stdout/stderr or fds 1
// and 2 is wrapped here as stream output; it is never read as a frame.
'use strict';
// Everything of the driver's lives in this function's scope, so that user
// code's top-level declarations cannot clash with it.
(() => {
const fs = require('fs');
const net = require('net');
const util = require('util');
const vm = require('vm');
const { createRequire } = require('module');
const { Console } = require('console');
const { Readable } = require('stream');
// The Node REPL's own rewriting of top-level await (needs --expose-internals).
const { processTopLevelAwait } = require('internal/repl/await');

const REQ_FD = 3, FRAME_FD = 4, OUT_FD = 5, ERR_FD = 6;

const cell = { id: null, budget: 0, dropped: 0, running: false, interrupted: false };

function send(msg) {
  const body = Buffer.from(JSON.stringify(msg));
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length);
  const buf = Buffer.concat([head, body]);
  let off = 0;
  while (off < buf.length) {
    try {
      off += fs.writeSync(FRAME_FD, buf, off);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
    }
  }
}

function emit(output) {
  const size = JSON.stringify(output).length;
  if (cell.budget < size) {
    cell.dropped += size;
    cell.budget = 0;
    return;
  }
  cell.budget -= size;
  send({ type: 'output', id: cell.id, output });
}

// Raw fd 1/2 (child processes, fs.writeSync(1, ...)): read asynchronously
// while the event loop runs, and drained synchronously before each output.
const decoders = { [OUT_FD]: new util.TextDecoder('utf-8'), [ERR_FD]: new util.TextDecoder('utf-8') };
const names = { [OUT_FD]: 'stdout', [ERR_FD]: 'stderr' };
function streamText(fd, chunk) {
  const text = decoders[fd].decode(chunk, { stream: true });
  if (text) emit({ output_type: 'stream', name: names[fd], text });
}
const rawReaders = {};
for (const fd of [OUT_FD, ERR_FD]) {
  const s = new net.Socket({ fd, readable: true, writable: false });
  s.on('data', (chunk) => streamText(fd, chunk));
  s.on('error', () => {});
  s.unref();
  rawReaders[fd] = s;
}
function drainFds() {
  const buf = Buffer.alloc(1 << 16);
  for (const fd of [OUT_FD, ERR_FD]) {
    for (;;) {
      let n;
      try {
        n = fs.readSync(fd, buf, 0, buf.length, null);
      } catch (e) {
        break; // EAGAIN: nothing pending
      }
      if (n <= 0) break;
      streamText(fd, buf.subarray(0, n));
    }
  }
}

function streamWrite(name) {
  return function write(chunk, encoding, cb) {
    if (typeof encoding === 'function') cb = encoding;
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf-8');
    drainFds();
    if (text) emit({ output_type: 'stream', name, text });
    if (typeof cb === 'function') process.nextTick(cb);
    return true;
  };
}
process.stdout.write = streamWrite('stdout');
process.stderr.write = streamWrite('stderr');
globalThis.console = new Console({ stdout: process.stdout, stderr: process.stderr, colorMode: false });

// User code gets Node's globals plus a require that resolves from the working directory.
globalThis.require = createRequire(process.cwd() + '/');

function errorOutput(err) {
  if (err instanceof Error || (err && typeof err === 'object' && 'stack' in err)) {
    return {
      output_type: 'error',
      ename: err.name || 'Error',
      evalue: err.message === undefined ? '' : String(err.message),
      traceback: String(err.stack || `${err.name}: ${err.message}`)
        .split('\n')
        .filter((line) => !/\((node:vm|\[eval\])|at \[eval\]|node:internal\//.test(line)),
    };
  }
  const text = util.inspect(err, { colors: false });
  return { output_type: 'error', ename: 'Error', evalue: `Uncaught ${text}`, traceback: [`Uncaught ${text}`] };
}

process.on('uncaughtException', (err) => {
  drainFds();
  if (cell.running) emit(errorOutput(err));
  else process.stderr.write(`Uncaught ${util.inspect(err)}\n`);
});
process.on('unhandledRejection', (err) => {
  drainFds();
  if (cell.running) emit(errorOutput(err));
  else process.stderr.write(`Unhandled rejection: ${util.inspect(err)}\n`);
});

// SIGINT while a cell awaits a promise rejects the wait; while it runs
// synchronously, vm's breakOnSigint throws inside the script instead; in
// between (the cell has started but its script not yet), it is kept for
// the script to throw as it starts.
//
// Node's vm leaves two short windows in which a SIGINT ends the process:
// it removes these listeners (libuv restores SIG_DFL) before its watchdog
// takes the signal, and its watchdog hands the signal to Node's exit
// handler before they come back (lib/vm.js, src/node_watchdog.cc).
// JavaScript cannot close them; a kernel that dies there is reported as
// KernelDied and its session starts afresh.
let interruptWait = null;
process.on('SIGINT', () => {
  if (interruptWait) interruptWait();
  else if (cell.running) cell.interrupted = true;
});

function interruptError() {
  const e = new Error('Script execution was interrupted by `SIGINT`');
  e.name = 'KeyboardInterrupt';
  return e;
}

let executionCount = 0;

async function evaluate(code) {
  let wrapped = null;
  try {
    new vm.Script(code, { filename: 'cell' });
  } catch (e) {
    if (e instanceof SyntaxError && /await/.test(code)) wrapped = processTopLevelAwait(code);
    if (!wrapped) throw e;
  }
  const script = new vm.Script(wrapped || code, { filename: `cell[${executionCount}]` });
  if (cell.interrupted) throw interruptError();
  let value = script.runInThisContext({ breakOnSigint: true, displayErrors: false });
  const interrupted = new Promise((_, reject) => {
    interruptWait = () => reject(interruptError());
  });
  try {
    if (wrapped) {
      value = (await Promise.race([value, interrupted])).value;
    }
  } finally {
    interruptWait = null;
  }
  return value;
}

async function run(req) {
  cell.id = req.id;
  cell.budget = Number(req.max_output || 1 << 20);
  cell.dropped = 0;
  cell.running = true;
  cell.interrupted = false;
  executionCount++;
  // From here an interrupt reaches this cell (see Kernel.Interrupt).
  send({ type: 'started', id: cell.id });
  let status = 'ok';
  try {
    if (req.cwd) process.chdir(req.cwd);
    // Standard input is the request's text (fd 0 itself is /dev/null).
    Object.defineProperty(process, 'stdin', { value: Readable.from([String(req.stdin || '')]), configurable: true });
    const code = String(req.code || '');
    if (code.trim() !== '') {
      const value = await evaluate(code);
      drainFds();
      if (value !== undefined) {
        emit({
          output_type: 'execute_result',
          execution_count: executionCount,
          data: { 'text/plain': util.inspect(value, { colors: false }) },
          metadata: {},
        });
      }
    }
  } catch (err) {
    status = 'error';
    drainFds();
    if (err && err.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
      err.name = 'KeyboardInterrupt';
    }
    emit(errorOutput(err));
  }
  // Let callbacks already due (e.g. a resolved promise's console.log) run first.
  await new Promise((resolve) => setImmediate(resolve));
  drainFds();
  cell.running = false;
  send({ type: 'done', id: cell.id, status, execution_count: executionCount, dropped_bytes: cell.dropped });
}

// Completion and inspection, as Jupyter's complete_reply and inspect_reply.
// Jupyter counts code points; JavaScript strings count UTF-16 units.
const utf16At = (code, cp) => Array.from(code).slice(0, cp).join('').length;
const cpAt = (code, u16) => Array.from(code.slice(0, u16)).length;
let completer = null;
function complete(code, pos) {
  if (!completer) {
    // Node's REPL completer, over the global context that cells run in. The
    // REPL defines require, module, _ and _error there: put the cells' back.
    const { PassThrough } = require('stream');
    const saved = Object.getOwnPropertyDescriptors(globalThis);
    completer = require('repl').start({ input: new PassThrough(), output: new PassThrough(), terminal: false, useGlobal: true, prompt: '' });
    for (const key of Reflect.ownKeys(globalThis)) {
      try {
        if (!(key in saved)) delete globalThis[key];
        else if ('value' in saved[key] && globalThis[key] !== saved[key].value) Object.defineProperty(globalThis, key, saved[key]);
      } catch {} // not configurable: the REPL did not make it
    }
  }
  const at = utf16At(code, pos);
  const line = code.slice(code.lastIndexOf('\n', at - 1) + 1, at);
  return new Promise((resolve) => {
    completer.completer(line, (err, res) => {
      const [list, on] = err || !res ? [[], ''] : res;
      const matches = [...new Set(list.filter((m) => m))];
      resolve({ matches, cursor_start: cpAt(code, at - on.length), cursor_end: pos, metadata: {} });
    });
  });
}
function inspect(code, pos, detail) {
  const at = utf16At(code, pos);
  const before = code.slice(0, at).match(/[\w$.]*$/)[0];
  const after = code.slice(at).match(/^[\w$]*/)[0];
  const name = (before + after).replace(/^\.+|\.+$/g, '');
  // Only dotted names are looked up: nothing is called.
  if (!/^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/.test(name)) return { found: false, data: {}, metadata: {} };
  let value;
  try {
    value = vm.runInThisContext(name);
  } catch {
    return { found: false, data: {}, metadata: {} };
  }
  let text = `${name}: ${typeof value}\n${util.inspect(value, { depth: detail ? 2 : 0 })}`;
  if (typeof value === 'function' && detail) text += '\n' + Function.prototype.toString.call(value);
  return { found: true, data: { 'text/plain': text }, metadata: {} };
}
async function assist(req) {
  let reply;
  try {
    const pos = req.cursor_pos ?? Array.from(req.code).length;
    reply = req.type === 'complete' ? await complete(req.code, pos) : inspect(req.code, pos, req.detail_level || 0);
  } catch (e) {
    reply = { error: String(e) };
  }
  send({ type: 'reply', id: req.id, reply });
}

// Requests are read asynchronously so that user timers and promises keep running.
let pending = Buffer.alloc(0);
let queue = Promise.resolve();
const requests = new net.Socket({ fd: REQ_FD, readable: true, writable: false });
requests.on('data', (chunk) => {
  pending = Buffer.concat([pending, chunk]);
  while (pending.length >= 4) {
    const len = pending.readUInt32BE(0);
    if (pending.length < 4 + len) break;
    const req = JSON.parse(pending.subarray(4, 4 + len).toString('utf-8'));
    pending = pending.subarray(4 + len);
    if (req.type === 'execute') queue = queue.then(() => run(req));
    else if (req.type === 'complete' || req.type === 'inspect') {
      queue = queue.then(() => assist(req));
    }
  }
});
requests.on('end', () => process.exit(0));
requests.on('error', () => process.exit(0));

send({ type: 'ready', language: 'javascript', version: process.versions.node });
})();

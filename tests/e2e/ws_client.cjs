// WebSocket client for tests/e2e/ws.sh with Node's `ws` (npm, pinned in
// tests/deploy/package-lock.json, installed by tests/deploy/npm_install.sh):
// a second client no one here wrote.
//
//   node ws_client.cjs URL stream|batch|too-big N
//
// Prints lines the shell test compares; times as "t=SECONDS", never asserted.
'use strict';
const WebSocket = require('ws');

const [url, cmd, arg] = process.argv.slice(2);
const t0 = Date.now();
const t = () => 't=' + ((Date.now() - t0) / 1000).toFixed(3);
const sleep = (id, ms) => ({ jsonrpc: '2.0', method: 'sleep', params: { ms }, id });
const idOf = (m) => { const v = JSON.parse(m); return Array.isArray(v) ? `array[${v.length}]` : String(v.id); };
const fail = (e) => { console.log('error', e.message || e); process.exit(1); };

function open(protocols, options) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, options);
    const got = [];
    let waiting = null;
    ws.on('message', (data, isBinary) => {
      const m = isBinary ? '(binary)' : data.toString();
      if (waiting) { const w = waiting; waiting = null; w(m); } else got.push(m);
    });
    ws.recv = () => new Promise((res) => { if (got.length) res(got.shift()); else waiting = res; });
    ws.closed = new Promise((res) => ws.on('close', (code) => res(code)));
    ws.on('open', () => resolve(ws));
    ws.on('error', reject);
  });
}

async function stream() {
  const ws = await open(['jrpc.stream']);
  console.log('protocol', ws.protocol);
  ws.send(JSON.stringify([sleep('a', 1500), sleep('b', 50), sleep('c', 500)]));
  for (let i = 0; i < 3; i++) {
    const m = await ws.recv();
    console.log(t(), 'answer', idOf(m), m);
  }
  ws.close(1000);
  console.log('closed', await ws.closed);
}

async function batch() {
  const ws = await open(['jrpc']);
  console.log('protocol', ws.protocol);
  ws.send(JSON.stringify([{ jsonrpc: '2.0', method: 'add', params: [1, 2], id: 1 },
                          { jsonrpc: '2.0', method: 'add', params: [3, 4], id: 2 }]));
  console.log('batch:', await ws.recv());
  ws.close(1000);
  console.log('closed', await ws.closed);
}

async function tooBig(n) {
  const ws = await open([]);
  ws.send('[' + ' '.repeat(n) + ']');
  console.log('closed', await ws.closed);
}

const run = { stream, batch, 'too-big': () => tooBig(Number(arg)) }[cmd];
if (!run) fail('unknown command ' + cmd);
const timer = setTimeout(() => fail('timed out'), 20000);
run().then(() => clearTimeout(timer), fail);

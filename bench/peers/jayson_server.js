// jrpc-peer-jayson: a JSON-RPC 2.0 HTTP server on Node with jayson (from
// npm, installed into bench/peers/node_modules by run.sh), one method `add`
// by position: the same job as jrpc's demo worker.
//
//   node bench/peers/jayson_server.js PORT
'use strict';
const jayson = require('jayson');

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0 || port > 65535) {
  console.error('usage: node jayson_server.js PORT');
  process.exit(2);
}
const server = new jayson.Server({
  add: (args, callback) => callback(null, args[0] + args[1]),
});
server.http().listen(port, '127.0.0.1', () => {
  console.error(`jrpc-peer-jayson: listening on 127.0.0.1:${port}`);
});

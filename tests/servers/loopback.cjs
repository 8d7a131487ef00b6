// Preloaded into node test servers (node -r loopback.cjs ...): every listen() binds
// 127.0.0.1 only, whatever the server asked for, and the real port is reported on
// stderr as "mcpcall-test-port=<n>" so tests can use port 0.
const net = require("net");
const original = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  let port = 0;
  let callback;
  if (typeof args[args.length - 1] === "function") callback = args.pop();
  if (typeof args[0] === "object" && args[0] !== null) port = args[0].port || 0;
  else if (args.length > 0) port = Number(args[0]) || 0;
  this.once("listening", () => {
    const address = this.address();
    if (address && typeof address === "object") process.stderr.write(`mcpcall-test-port=${address.port}\n`);
  });
  return original.call(this, { port, host: "127.0.0.1" }, callback);
};

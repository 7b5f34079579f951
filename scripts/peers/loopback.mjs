// Preload for servers that cannot be told where to listen (supergateway binds every
// interface): every net.Server listens on 127.0.0.1 instead. When ZEST_LISTEN_FD is set (a
// test handing over a socket it holds), the first server listens on that descriptor instead,
// so the test never has to close a port and hope to get it back. Use with node --import.
import net from "node:net";
const listen = net.Server.prototype.listen;
let handOver = process.env.ZEST_LISTEN_FD;
net.Server.prototype.listen = function (...args) {
  if (handOver) {
    const fd = Number(handOver);
    handOver = undefined;
    const cb = args.find((a) => typeof a === "function");
    return cb ? listen.call(this, { fd }, cb) : listen.call(this, { fd });
  }
  if (typeof args[0] === "number") {
    const port = args[0];
    const rest = args.slice(1).filter((a) => typeof a !== "string");
    return listen.call(this, port, "127.0.0.1", ...rest);
  }
  if (args[0] && typeof args[0] === "object" && !Array.isArray(args[0])) {
    return listen.call(this, { ...args[0], host: "127.0.0.1" }, ...args.slice(1));
  }
  return listen.apply(this, args);
};

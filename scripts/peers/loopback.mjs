// Preload for servers that cannot be told where to listen (supergateway binds every
// interface): every net.Server listens on 127.0.0.1 instead. Use with node --import.
import net from "node:net";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
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

import t from "tap";
import { isPrivateAddress } from "../../src/lib/private-addresses.js";

t.test("loopback, private, link-local, unspecified and reserved addresses are refused, IPv4 and IPv6", async (t) => {
  for (const address of [
    "127.0.0.1",
    "127.255.0.9",
    "10.1.2.3",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "255.255.255.255",
    "::",
    "::1",
    "[::1]",
    "fe80::1",
    "fc00::1",
    "fd12:3456::1",
    "ff02::1",
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::ffff:7f00:1",
    "0:0:0:0:0:ffff:a9fe:a9fe",
    "64:ff9b::a00:1",
    "not-an-address",
  ]) {
    t.equal(isPrivateAddress(address), true, address);
  }
});

t.test("public addresses pass", async (t) => {
  for (const address of ["8.8.8.8", "172.32.0.1", "192.169.0.1", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "::ffff:808:808"]) {
    t.equal(isPrivateAddress(address), false, address);
  }
});

/**
 * A self-signed certificate for `wss://` tests, made with `openssl`.
 *
 * @module
 */

import assert from "node:assert/strict";

/** PEM texts of a certificate and its key. */
export interface TestCertificate {
  /** The certificate (also its own CA). */
  cert: string;
  /** The private key. */
  key: string;
  /** Where the certificate file is. */
  certFile: string;
}

/**
 * Makes a certificate for `localhost` and `127.0.0.1` (EC P-256, one day, not a CA) in `dir`.
 *
 * @param dir A scratch directory; the test removes it.
 */
export async function selfSignedCertificate(dir: string): Promise<TestCertificate> {
  const openssl = await new Deno.Command("openssl", {
    args: [
      ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"],
      ...["-days", "1", "-subj", "/CN=localhost"],
      ...["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
      ...["-addext", "basicConstraints=critical,CA:FALSE"],
      ...["-keyout", `${dir}/key.pem`, "-out", `${dir}/cert.pem`],
    ],
    stdout: "null",
    stderr: "null",
  }).output();
  assert.equal(openssl.code, 0, "openssl could not make a certificate");
  return {
    cert: await Deno.readTextFile(`${dir}/cert.pem`),
    key: await Deno.readTextFile(`${dir}/key.pem`),
    certFile: `${dir}/cert.pem`,
  };
}

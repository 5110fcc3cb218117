import { type FSWatcher, watch } from "node:fs";
import { dirname, resolve } from "node:path";
import type { SecureContextOptions } from "node:tls";
import { ConfigError } from "./config/config-error.js";
import { describeCertificate, readTlsFiles, secureContextOptions, type TlsCredentials, type TlsSettings } from "./config/tls-files.js";

/** What a reload logs to. */
export interface CertificateLog {
  info(details: object, message: string): void;
  error(details: object, message: string): void;
}

/** The server whose certificate is replaced: node:tls's, which Http2SecureServer is. */
export interface SecureServer {
  setSecureContext(options: SecureContextOptions): void;
}

/** Changes to the files within this long of each other are one reload (a renewal writes the certificate and key apart). */
export const CERTIFICATE_DEBOUNCE_MS = 200;

/**
 * The certificate a TLS server presents, read again from `server.tls`'s files on demand (SIGHUP) and when they
 * change. A new certificate applies to new connections (setSecureContext); open ones keep theirs, and nothing is
 * dropped. Files that cannot be used (missing, half written, a key of another certificate) leave the certificate in
 * force as it is, and the problem is logged: a reload never stops keygate serving.
 */
export class ServerCertificates {
  private readonly server: SecureServer;
  private readonly settings: TlsSettings;
  private readonly log: CertificateLog;
  private current: TlsCredentials;
  private watchers: FSWatcher[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(server: SecureServer, settings: TlsSettings, current: TlsCredentials, log: CertificateLog) {
    this.server = server;
    this.settings = settings;
    this.current = current;
    this.log = log;
  }

  /** The certificate new connections are given. */
  get certificate(): TlsCredentials["certificate"] {
    return this.current.certificate;
  }

  /**
   * Reads the files again and, when they can be used, gives new connections their certificate. `onlyWhenChanged`
   * (a file watcher's call) skips files that read as before, so a change to another file in the same directory
   * logs nothing. Returns whether a certificate read now is in force.
   */
  reload(onlyWhenChanged = false): boolean {
    let next: TlsCredentials;
    try {
      next = readTlsFiles(this.settings);
    } catch (error) {
      const problem = error instanceof ConfigError ? error.problems.join("; ") : String(error);
      this.log.error({ problem, certificate: describeCertificate(this.current.certificate) }, `TLS certificate not reloaded: ${problem}`);
      return false;
    }
    if (onlyWhenChanged && next.cert === this.current.cert && next.key === this.current.key) return false;
    try {
      this.server.setSecureContext(secureContextOptions(next));
    } catch (error) {
      this.log.error({ err: error }, "TLS certificate not reloaded: the server refused it");
      return false;
    }
    this.current = next;
    const certificate = describeCertificate(next.certificate);
    this.log.info({ certificate }, `TLS certificate reloaded: serial ${certificate.serialNumber}, valid to ${certificate.validTo}`);
    return true;
  }

  /**
   * Reloads when a file changes. The directories are watched rather than the files: certbot and cert-manager (a
   * Kubernetes secret) replace files or swap a symbolic link, which a watch on the old file would not see. A
   * directory that cannot be watched is logged; SIGHUP still reloads.
   */
  watch(debounceMs = CERTIFICATE_DEBOUNCE_MS): void {
    const paths = [this.settings.cert, this.settings.key, this.settings.ca].filter((path) => path !== undefined);
    for (const directory of new Set(paths.map((path) => dirname(resolve(path))))) {
      try {
        const watcher = watch(directory, () => {
          clearTimeout(this.timer);
          this.timer = setTimeout(() => this.reload(true), debounceMs);
        });
        watcher.on("error", (error) =>
          this.log.error({ err: error, directory }, "cannot watch the TLS files any longer; SIGHUP reloads them"),
        );
        this.watchers.push(watcher);
      } catch (error) {
        this.log.error({ err: error, directory }, "cannot watch the TLS files for changes; SIGHUP reloads them");
      }
    }
  }

  /** Stops watching the files. */
  close(): void {
    clearTimeout(this.timer);
    for (const watcher of this.watchers) watcher.close();
    this.watchers = [];
  }
}

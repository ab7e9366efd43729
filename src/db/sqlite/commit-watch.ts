import { closeSync, openSync, readSync, realpathSync } from 'node:fs';
import { endianness } from 'node:os';

/**
 * Tells whether anything may have been committed to a SQLite database in WAL mode since the last
 * look, by any connection of any process, for the price of one 48-byte read and no SQL statement.
 *
 * In WAL mode every connection shares the wal-index in the `-shm` file beside the database
 * (https://sqlite.org/walformat.html). Its header starts the file: a format version, a change
 * counter that each transaction increments, the last valid WAL frame, the WAL salts that change on
 * every reset of the log, and checksums. A commit is not visible to any reader until its writer
 * has rewritten that header, so an unchanged header means nothing was committed in between.
 *
 * Any SQL statement, even `PRAGMA data_version`, costs a WAL read transaction (locks in the same
 * file); this read costs a fraction of that. Anything the watch cannot read or does not recognise
 * (no `-shm` file, another format version) counts as a change, so a caller that trusts the watch
 * can only ever do more reads than needed, never fewer.
 *
 * One read serves every caller of one turn of the event loop: under load, the requests that one
 * poll of the sockets delivered share it instead of a system call each, and they go on together
 * once it is made (docs/performance.md has the measurements). It is made in the check phase
 * (`setImmediate`), after that poll, so it still comes after every caller asked: a commit that
 * completed before a request was read from its socket is seen by that request, as with a read of
 * its own.
 */

/** The wal-index header (the first of its two copies): `WalIndexHdr` in SQLite's wal.c. */
const HEADER_BYTES = 48;
/** `iVersion`, the first field: the wal-index format of every SQLite since 3.7.0. */
const WAL_INDEX_FORMAT = 3007000;
/** The wal-index is shared memory: its integers are in the machine's own byte order. */
const NATIVE_LITTLE_ENDIAN = endianness() === 'LE';

export class CommitWatch {
  private fd: number | null = null;
  private readonly header = Buffer.alloc(HEADER_BYTES);
  private readonly seen = Buffer.alloc(HEADER_BYTES);
  private generation = 0;
  /** The read that the callers since the last one wait for; `null` until someone asks. */
  private nextRead: Promise<number> | null = null;

  private readonly databasePath: string;

  /** `databasePath`: the SQLite file, opened in WAL mode by a connection that stays open. */
  constructor(databasePath: string) {
    this.databasePath = databasePath;
  }

  /**
   * A number that stays the same for as long as no transaction commits, and changes when one may
   * have; it reflects every commit that completed before this call. Ask for it before reading the
   * data it guards: a commit after the call changes the next one.
   */
  current(): Promise<number> {
    this.nextRead ??= new Promise((resolve) => {
      setImmediate(() => {
        // Whoever asks from here on, while this read's callers go on, waits for a read of its own.
        this.nextRead = null;
        resolve(this.read());
      });
    });
    return this.nextRead;
  }

  private read(): number {
    if (!this.readHeader() || this.formatVersion() !== WAL_INDEX_FORMAT) {
      this.seen.fill(0);
      return ++this.generation;
    }
    if (!this.header.equals(this.seen)) {
      this.header.copy(this.seen);
      this.generation += 1;
    }
    return this.generation;
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }

  private formatVersion(): number {
    return NATIVE_LITTLE_ENDIAN ? this.header.readUInt32LE(0) : this.header.readUInt32BE(0);
  }

  private readHeader(): boolean {
    try {
      // The file exists once a connection has used the database in WAL mode; it is removed only
      // when the last connection closes, which the caller's open connection prevents. SQLite puts
      // it beside the database's real path, symbolic links resolved.
      this.fd ??= openSync(`${realpathSync(this.databasePath)}-shm`, 'r');
      return readSync(this.fd, this.header, 0, HEADER_BYTES, 0) === HEADER_BYTES;
    } catch {
      this.close();
      return false;
    }
  }
}

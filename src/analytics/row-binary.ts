import type { ColumnType, ColumnValue } from "./rows.js";

/**
 * Rows in ClickHouse's RowBinary format, for the embedded engine: its parser reads them for a fraction of what the
 * same rows cost as JSON, and strings go in as bytes
 * with a length, so no value is ever escaped or can spill into another column.
 *
 * Layout per value: String is its UTF-8 length as an unsigned LEB128 varint, then the bytes; Int64, UInt64 and
 * Float64 are 8 bytes little-endian, Int32 4; Bool one byte; Array(String) is the element count as a varint, then
 * each string.
 */
export class RowBinaryWriter {
  private buffer: Buffer;
  private offset = 0;

  constructor(expectedRows: number) {
    this.buffer = Buffer.allocUnsafe(Math.max(1024, expectedRows * 128));
  }

  /** One row, `values` in the order of `layout` (rowLayout); when a value cannot be written, nothing of the row is kept. */
  write(values: readonly ColumnValue[], layout: RowLayout): void {
    const start = this.offset;
    try {
      for (const [column, writeColumn] of layout.entries()) writeColumn(this, values[column] as ColumnValue);
    } catch (error) {
      this.offset = start;
      throw error;
    }
  }

  /** Starts over, keeping the memory: a writer reused for the next batch touches no fresh pages. */
  reset(): void {
    this.offset = 0;
  }

  /** The rows written so far (a view of the writer's memory: copy it or stop writing). */
  bytes(): Buffer {
    return this.buffer.subarray(0, this.offset);
  }

  string(value: string): void {
    if (value.length <= MAX_ONE_BYTE_VARINT && this.asciiString(value)) return;
    const length = Buffer.byteLength(value, "utf8");
    this.reserve(length + 5);
    this.varint(length);
    this.offset += this.buffer.write(value, this.offset, length, "utf8");
  }

  strings(values: readonly string[]): void {
    this.reserve(5);
    this.varint(values.length);
    for (const value of values) this.string(value);
  }

  /** A whole number within ±2^53 (rows.ts makes sure), as a two's complement Int64 (a UInt64 when not negative). */
  int64(value: number): void {
    this.reserve(8);
    this.buffer.writeUInt32LE(value >>> 0, this.offset);
    this.buffer.writeInt32LE(Math.floor(value / 0x1_0000_0000), this.offset + 4);
    this.offset += 8;
  }

  /** A whole number within Int32 (rows.ts makes sure). */
  int32(value: number): void {
    this.reserve(4);
    this.offset = this.buffer.writeInt32LE(value, this.offset);
  }

  bool(value: boolean): void {
    if (typeof value !== "boolean") throw new TypeError(`expected a boolean, got ${typeof value}`);
    this.reserve(1);
    this.buffer[this.offset++] = value ? 1 : 0;
  }

  float64(value: number): void {
    this.reserve(8);
    this.offset = this.buffer.writeDoubleLE(value, this.offset);
  }

  /**
   * Almost every value is short ASCII (ids, outcomes, tags): copied here, character by character, instead of two
   * calls into the runtime per value, which cost several times more per row (callgrind, on the request thread).
   * false, with nothing written, when the value holds a character beyond ASCII.
   */
  private asciiString(value: string): boolean {
    const length = value.length;
    this.reserve(length + 1);
    const buffer = this.buffer;
    const start = this.offset + 1;
    for (let at = 0; at < length; at++) {
      const code = value.charCodeAt(at);
      if (code >= 0x80) return false;
      buffer[start + at] = code;
    }
    buffer[start - 1] = length;
    this.offset = start + length;
    return true;
  }

  /** Callers reserve room first. */
  private varint(value: number): void {
    while (value >= 0x80) {
      this.buffer[this.offset++] = (value & 0x7f) | 0x80;
      value = Math.floor(value / 0x80);
    }
    this.buffer[this.offset++] = value;
  }

  private reserve(bytes: number): void {
    if (this.offset + bytes <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.offset + bytes));
    this.buffer.copy(grown, 0, 0, this.offset);
    this.buffer = grown;
  }
}

/** The longest string whose length is a one-byte varint. */
const MAX_ONE_BYTE_VARINT = 0x7f;

type ColumnWriter = (writer: RowBinaryWriter, value: ColumnValue) => void;

/** How each column of a table is written, in column order. */
export type RowLayout = readonly ColumnWriter[];

const WRITER_OF_TYPE: Record<ColumnType, ColumnWriter> = {
  String: (writer, value) => writer.string(value as string),
  Int32: (writer, value) => writer.int32(value as number),
  Int64: (writer, value) => writer.int64(value as number),
  UInt64: (writer, value) => writer.int64(value as number),
  Float64: (writer, value) => writer.float64(value as number),
  Bool: (writer, value) => writer.bool(value as boolean),
  "Array(String)": (writer, value) => writer.strings(value as string[]),
};

/** One writer per column, from the column's type: the layout follows the table's one definition. */
export function rowLayout(types: readonly ColumnType[]): RowLayout {
  return types.map((type) => WRITER_OF_TYPE[type]);
}

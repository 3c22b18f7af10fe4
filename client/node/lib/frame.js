// frame.js - omld's framing: 4-byte big-endian payload length, then the
// payload (one serialized Request or Response). Pure: no I/O, so a frame
// split at any byte boundary gives the same result (test/frame.test.js).
"use strict";

// Collects received chunks and hands out whole payloads. Chunks are kept
// in a list and joined once per frame, so a large answer arriving in many
// small reads is not copied once per read.
class FrameReader {
  // maxFrame: largest payload accepted; a header announcing more makes
  // next() throw a RangeError (the stream cannot be resynchronised).
  constructor(maxFrame) {
    this.maxFrame = maxFrame;
    this.chunks = [];
    this.length = 0;  // bytes held in chunks
  }

  feed(chunk) {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  // The next whole payload (a Buffer), or null until more bytes arrive.
  next() {
    if (this.length < 4) return null;
    const head = this.take(4, false);
    const n = head.readUInt32BE(0);
    if (n > this.maxFrame)
      throw new RangeError(`answer of ${n} bytes exceeds maxFrame ${this.maxFrame}`);
    if (this.length < 4 + n) return null;
    this.take(4, true);
    return this.take(n, true);
  }

  // The first n buffered bytes (n <= length), removed when consume is set.
  take(n, consume) {
    if (n === 0) return Buffer.alloc(0);
    const first = this.chunks[0];
    let out;
    if (first.length >= n) {
      out = first.subarray(0, n);
      if (consume) {
        if (first.length === n) this.chunks.shift();
        else this.chunks[0] = first.subarray(n);
      }
    } else {
      out = Buffer.allocUnsafe(n);
      let have = 0, i = 0;
      while (have < n) {
        const c = this.chunks[i++];
        have += c.copy(out, have, 0, Math.min(c.length, n - have));
      }
      if (consume) {
        let left = n;
        while (left > 0 && left >= this.chunks[0].length) left -= this.chunks.shift().length;
        if (left > 0) this.chunks[0] = this.chunks[0].subarray(left);
      }
    }
    if (consume) this.length -= n;
    return out;
  }
}

// The 4-byte header of a payload of n bytes.
function frameHeader(n) {
  if (n > 0xFFFFFFFF) throw new RangeError(`a payload of ${n} bytes does not fit a frame`);
  const h = Buffer.allocUnsafe(4);
  h.writeUInt32BE(n, 0);
  return h;
}

module.exports = { FrameReader, frameHeader };

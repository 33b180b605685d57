/*
 * The contract's checksum (clients/CONTRACT.md "Rows, bytes and checksum"), as
 * clients/common/pgpb_checksum.h: the sum (mod 2^64) of every row's hash, so that row order does
 * not matter. A row's hash reads its COPY text, its '\n' included, as 8-byte little-endian words
 * (one multiply each), then its tail and length, then murmur3's fmix64. COPY text comes in pieces
 * of any size (a full block, COPY's byte stream): a row may span them, a piece may hold several.
 */
package pgpathbench.clients;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

final class RowChecksum {
    static final long BASIS = 0xcbf29ce484222325L, MULT = 0x9e3779b97f4a7c15L;
    private static final VarHandle LE64 = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

    long sum;                // the hashes of the rows ended, mod 2^64
    private long h = BASIS;  // the row begun: its full words mixed in
    private long tail, len;  // its bytes after them (len % 8 of them, little-endian), its length

    /** The next n bytes of COPY text: a raw '\n' ends a row (COPY text escapes values' newlines). */
    void update(byte[] b, int off, int n) {
        int start = off, e = off + n;
        for (int i = off; i < e; i++) {
            if (b[i] == '\n') {
                add(b, start, i + 1);
                endRow();
                start = i + 1;
            }
        }
        add(b, start, e);
    }

    private void add(byte[] b, int i, int e) {
        for (; e - i >= 8; i += 8) word((long) LE64.get(b, i));
        for (; i < e; i++) {
            tail |= (b[i] & 0xffL) << ((len & 7) * 8);
            if ((++len & 7) == 0) {
                h = (h ^ tail) * MULT;
                tail = 0;
            }
        }
    }

    /** 8 more bytes, w: whole when the row's length is a multiple of 8, else completing the tail. */
    private void word(long w) {
        int shift = (int) (len & 7) * 8;
        if (shift == 0) {
            h = (h ^ w) * MULT;
        } else {
            h = (h ^ (tail | w << shift)) * MULT;
            tail = w >>> (64 - shift);
        }
        len += 8;
    }

    private void endRow() {
        sum += fmix64(((h ^ tail) * MULT) ^ len);
        h = BASIS;
        tail = 0;
        len = 0;
    }

    static long fmix64(long k) {
        k ^= k >>> 33;
        k *= 0xff51afd7ed558ccdL;
        k ^= k >>> 33;
        k *= 0xc4ceb9fe1a85ec53L;
        return k ^ (k >>> 33);
    }
}

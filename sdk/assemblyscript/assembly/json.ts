// A small JSON decoder for a filter's config (and, if a filter wants, the
// call's arguments or result). AssemblyScript cannot catch exceptions, so a
// syntax error makes parseJSON return null and sets lastJSONError.

export enum JSONKind {
  Null = 0,
  Bool = 1,
  Number = 2,
  String = 3,
  Array = 4,
  Object = 5,
}

export class JSONValue {
  kind: JSONKind = JSONKind.Null;
  bool: bool = false;
  num: f64 = 0;
  str: string = "";
  arr: JSONValue[] = [];
  obj: Map<string, JSONValue> = new Map<string, JSONValue>();

  static object(): JSONValue {
    let v = new JSONValue();
    v.kind = JSONKind.Object;
    return v;
  }

  isNull(): bool { return this.kind == JSONKind.Null; }
  isBool(): bool { return this.kind == JSONKind.Bool; }
  isNumber(): bool { return this.kind == JSONKind.Number; }
  isString(): bool { return this.kind == JSONKind.String; }
  isArray(): bool { return this.kind == JSONKind.Array; }
  isObject(): bool { return this.kind == JSONKind.Object; }

  /** The member `key` of an object; null when absent or not an object. */
  get(key: string): JSONValue | null {
    if (this.kind != JSONKind.Object || !this.obj.has(key)) return null;
    return this.obj.get(key);
  }
}

export let lastJSONError: string = "";

const MAX_DEPTH = 1000;

class Parser {
  i: i32 = 0;
  depth: i32 = 0;
  err: string | null = null;
  constructor(public s: string) {}

  fail(msg: string): JSONValue | null {
    if (this.err == null) this.err = msg + " at offset " + this.i.toString();
    return null;
  }

  space(): void {
    let s = this.s;
    while (this.i < s.length) {
      let c = s.charCodeAt(this.i);
      if (c != 32 && c != 9 && c != 10 && c != 13) return;
      this.i++;
    }
  }

  literal(word: string): bool {
    if (this.s.length - this.i >= word.length && this.s.substr(this.i, word.length) == word) {
      this.i += word.length;
      return true;
    }
    return false;
  }

  value(): JSONValue | null {
    this.space();
    if (this.i >= this.s.length) return this.fail("unexpected end of input");
    let c = this.s.charCodeAt(this.i);
    if (c == 123 /* { */) return this.object();
    if (c == 91 /* [ */) return this.array();
    if (c == 34 /* " */) {
      let str = this.string();
      if (str == null) return null;
      let v = new JSONValue();
      v.kind = JSONKind.String;
      v.str = str;
      return v;
    }
    if (c == 45 /* - */ || (c >= 48 && c <= 57)) return this.number();
    let v = new JSONValue();
    if (this.literal("true")) {
      v.kind = JSONKind.Bool;
      v.bool = true;
      return v;
    }
    if (this.literal("false")) {
      v.kind = JSONKind.Bool;
      return v;
    }
    if (this.literal("null")) return v;
    return this.fail("invalid character");
  }

  object(): JSONValue | null {
    if (++this.depth > MAX_DEPTH) return this.fail("nested too deeply");
    this.i++;
    let v = JSONValue.object();
    this.space();
    if (this.i < this.s.length && this.s.charCodeAt(this.i) == 125 /* } */) {
      this.i++;
      this.depth--;
      return v;
    }
    while (true) {
      this.space();
      if (this.i >= this.s.length || this.s.charCodeAt(this.i) != 34) return this.fail("expected a string key");
      let k = this.string();
      if (k == null) return null;
      this.space();
      if (this.i >= this.s.length || this.s.charCodeAt(this.i) != 58 /* : */) return this.fail("expected ':'");
      this.i++;
      let m = this.value();
      if (m == null) return null;
      v.obj.set(k, m);
      this.space();
      if (this.i >= this.s.length) return this.fail("unexpected end of input");
      let c = this.s.charCodeAt(this.i++);
      if (c == 125 /* } */) break;
      if (c != 44 /* , */) {
        this.i--;
        return this.fail("expected ',' or '}'");
      }
    }
    this.depth--;
    return v;
  }

  array(): JSONValue | null {
    if (++this.depth > MAX_DEPTH) return this.fail("nested too deeply");
    this.i++;
    let v = new JSONValue();
    v.kind = JSONKind.Array;
    this.space();
    if (this.i < this.s.length && this.s.charCodeAt(this.i) == 93 /* ] */) {
      this.i++;
      this.depth--;
      return v;
    }
    while (true) {
      let e = this.value();
      if (e == null) return null;
      v.arr.push(e);
      this.space();
      if (this.i >= this.s.length) return this.fail("unexpected end of input");
      let c = this.s.charCodeAt(this.i++);
      if (c == 93 /* ] */) break;
      if (c != 44 /* , */) {
        this.i--;
        return this.fail("expected ',' or ']'");
      }
    }
    this.depth--;
    return v;
  }

  digits(): i32 {
    let n = 0;
    while (this.i < this.s.length) {
      let c = this.s.charCodeAt(this.i);
      if (c < 48 || c > 57) break;
      this.i++;
      n++;
    }
    return n;
  }

  number(): JSONValue | null {
    let s = this.s;
    let start = this.i;
    if (s.charCodeAt(this.i) == 45) this.i++;
    if (this.i < s.length && s.charCodeAt(this.i) == 48) this.i++;
    else if (this.digits() == 0) return this.fail("invalid number");
    if (this.i < s.length && s.charCodeAt(this.i) == 46 /* . */) {
      this.i++;
      if (this.digits() == 0) return this.fail("invalid number");
    }
    if (this.i < s.length && (s.charCodeAt(this.i) | 32) == 101 /* e */) {
      this.i++;
      if (this.i < s.length && (s.charCodeAt(this.i) == 43 || s.charCodeAt(this.i) == 45)) this.i++;
      if (this.digits() == 0) return this.fail("invalid number");
    }
    let v = new JSONValue();
    v.kind = JSONKind.Number;
    v.num = parseFloat(s.substring(start, this.i));
    return v;
  }

  hex4(): i32 {
    if (this.s.length - this.i < 4) return -1;
    let r = 0;
    for (let k = 0; k < 4; k++) {
      let c = this.s.charCodeAt(this.i + k);
      let d: i32;
      if (c >= 48 && c <= 57) d = c - 48;
      else if (c >= 97 && c <= 102) d = c - 87;
      else if (c >= 65 && c <= 70) d = c - 55;
      else return -1;
      r = (r << 4) | d;
    }
    this.i += 4;
    return r;
  }

  // A JSON string starting at the opening quote. Escapes \uXXXX are UTF-16
  // code units, as AssemblyScript strings are.
  string(): string | null {
    let s = this.s;
    this.i++;
    let start = this.i;
    while (this.i < s.length) {
      let c = s.charCodeAt(this.i);
      if (c == 34) {
        let r = s.substring(start, this.i);
        this.i++;
        return r;
      }
      if (c == 92 || c < 32) break;
      this.i++;
    }
    let parts = new Array<string>();
    parts.push(s.substring(start, this.i));
    while (this.i < s.length) {
      let c = s.charCodeAt(this.i);
      if (c == 34) {
        this.i++;
        return parts.join("");
      }
      if (c < 32) {
        this.fail("control character in string");
        return null;
      }
      if (c != 92) {
        let from = this.i;
        while (this.i < s.length) {
          let d = s.charCodeAt(this.i);
          if (d == 34 || d == 92 || d < 32) break;
          this.i++;
        }
        parts.push(s.substring(from, this.i));
        continue;
      }
      this.i++;
      if (this.i >= s.length) break;
      let e = s.charCodeAt(this.i++);
      if (e == 34 || e == 92 || e == 47) parts.push(String.fromCharCode(e));
      else if (e == 98) parts.push("\b");
      else if (e == 102) parts.push("\f");
      else if (e == 110) parts.push("\n");
      else if (e == 114) parts.push("\r");
      else if (e == 116) parts.push("\t");
      else if (e == 117) {
        let u = this.hex4();
        if (u < 0) {
          this.fail("invalid \\u escape");
          return null;
        }
        parts.push(String.fromCharCode(u));
      } else {
        this.i--;
        this.fail("invalid escape");
        return null;
      }
    }
    this.fail("unterminated string");
    return null;
  }
}

/** Decodes one JSON value spanning all of s; null (and lastJSONError) on error. */
export function parseJSON(s: string): JSONValue | null {
  let p = new Parser(s);
  let v = p.value();
  if (v != null) {
    p.space();
    if (p.i != s.length) v = p.fail("unexpected data after the value");
  }
  let err = p.err;
  lastJSONError = err == null ? "" : err;
  return v;
}

//! Output encoding exactly as orjson writes it: strings, floats, and the RFC 3339 timestamps of
//! `stream_pairer.core.model.format_ts`. The differential test compares the bytes.

/// A JSON string with orjson's escapes (non-ASCII and `/` and DEL are written as they are).
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let b = s.as_bytes();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            0x0c => b"\\f",
            b'\r' => b"\\r",
            0..=0x1f => {
                out.extend_from_slice(&b[start..i]);
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(c >> 4) as usize]);
                out.push(HEX[(c & 15) as usize]);
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&b[start..i]);
        out.extend_from_slice(esc);
        start = i + 1;
    }
    out.extend_from_slice(&b[start..]);
    out.push(b'"');
}

pub fn write_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => write_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// A finite double as orjson 3.13 writes it: the shortest round-trip digits, laid out in fixed
/// notation when the decimal exponent is in -5..=15 (integral values get `.0`), otherwise as
/// `d.ddde+N` / `de-N`.
pub fn write_f64(out: &mut Vec<u8>, x: f64) {
    let mut buf = ryu::Buffer::new();
    let s = buf.format_finite(x);
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    // Split ryu's text into significant digits and the exponent of the first digit.
    let (mant, exp_part) = match s.find('e') {
        Some(i) => (&s[..i], s[i + 1..].parse::<i32>().unwrap_or(0)),
        None => (s, 0),
    };
    let (ip, fp) = match mant.find('.') {
        Some(i) => (&mant[..i], &mant[i + 1..]),
        None => (mant, ""),
    };
    let mut digits: Vec<u8> = Vec::with_capacity(20);
    digits.extend_from_slice(ip.as_bytes());
    digits.extend_from_slice(fp.as_bytes());
    // Exponent of the first digit of `digits`, as if written d.ddd x 10^e.
    let mut e = exp_part + ip.len() as i32 - 1;
    // Strip leading zeros (0.001 -> digits "0001").
    let lead = digits.iter().take_while(|&&d| d == b'0').count();
    if lead == digits.len() {
        // zero
        if neg {
            out.push(b'-');
        }
        out.extend_from_slice(b"0.0");
        return;
    }
    digits.drain(..lead);
    e -= lead as i32;
    while digits.len() > 1 && *digits.last().unwrap() == b'0' {
        digits.pop();
    }
    if neg {
        out.push(b'-');
    }
    if (-5..16).contains(&e) {
        if e >= 0 {
            let int_len = (e + 1) as usize;
            if digits.len() <= int_len {
                out.extend_from_slice(&digits);
                out.extend(std::iter::repeat_n(b'0', int_len - digits.len()));
                out.extend_from_slice(b".0");
            } else {
                out.extend_from_slice(&digits[..int_len]);
                out.push(b'.');
                out.extend_from_slice(&digits[int_len..]);
            }
        } else {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', (-e - 1) as usize));
            out.extend_from_slice(&digits);
        }
    } else {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        if e > 0 {
            out.push(b'+');
        }
        out.extend_from_slice(e.to_string().as_bytes());
    }
}

/// Days since 1970-01-01 -> (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month, day) -> days since 1970-01-01.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `format_ts`: "YYYY-MM-DDTHH:MM:SS.mmmZ" from epoch ms (truncated like `int()`), or null
/// outside the years 1..9999 that Python's datetime can represent.
pub fn write_ts(out: &mut Vec<u8>, ts_ms: Option<f64>) {
    let Some(ts) = ts_ms else {
        out.extend_from_slice(b"null");
        return;
    };
    if !ts.is_finite() || ts.abs() > 1e17 {
        out.extend_from_slice(b"null");
        return;
    }
    let ms = ts.trunc() as i64;
    let sec = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = sec.div_euclid(86_400);
    let tod = sec.rem_euclid(86_400);
    let (y, mo, d) = civil_from_days(days);
    if !(1..=9999).contains(&y) {
        out.extend_from_slice(b"null");
        return;
    }
    let mut t = *b"\"0000-00-00T00:00:00.000Z\"";
    put(&mut t[1..5], y as u32);
    put(&mut t[6..8], mo);
    put(&mut t[9..11], d);
    put(&mut t[12..14], (tod / 3600) as u32);
    put(&mut t[15..17], ((tod / 60) % 60) as u32);
    put(&mut t[18..20], (tod % 60) as u32);
    put(&mut t[21..24], milli as u32);
    out.extend_from_slice(&t);
}

/// Writes `v` as zero-padded decimal digits filling `dst`.
fn put(dst: &mut [u8], mut v: u32) {
    for c in dst.iter_mut().rev() {
        *c = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

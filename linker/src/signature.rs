//! Function signatures as widths: what a PTX module defines (`.visible .func`) and what a
//! C header declares, so that the two can be compared without a C compiler.

/// A function's name, the bits of its return value (none: `void`) and of each parameter.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Signature {
    pub name: String,
    pub ret: Option<u32>,
    pub params: Vec<u32>,
}

/// Every function `ptx` defines, `.visible` or `.weak` (a default that another module's
/// definition replaces), whose name starts with `prefix`.
pub fn ptx_functions(ptx: &str, prefix: &str) -> Result<Vec<Signature>, String> {
    let mut found = Vec::new();
    let mut lines = ptx.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(head) = line.strip_prefix(".visible .func").or_else(|| line.strip_prefix(".weak .func")) else { continue };
        let (ret, name) = match head.trim().strip_prefix('(') {
            Some(rest) => {
                let (ret, name) = rest.split_once(')').ok_or_else(|| format!("a return without its ')': {line}"))?;
                (Some(param_bits(ret)?), name)
            }
            None => (None, head),
        };
        let name = name.trim().trim_end_matches('(').trim();
        if !name.starts_with(prefix) {
            continue;
        }
        let mut params = Vec::new();
        for param in lines.by_ref().map(str::trim).filter(|l| *l != "(") {
            if param.starts_with(')') {
                break;
            }
            params.push(param_bits(param.trim_end_matches(','))?);
        }
        // A declaration (a function called before its definition) ends with `;`, a
        // definition goes on with its body: each function is counted at its definition.
        let declaration = lines.peek().is_some_and(|next| next.trim() == ";");
        if !declaration {
            found.push(Signature { name: name.to_string(), ret, params });
        }
    }
    Ok(found)
}

/// The bits of one PTX parameter: `.param .bN name`, or an aggregate
/// `.param .align A .b8 name[N]`.
fn param_bits(param: &str) -> Result<u32, String> {
    let words: Vec<&str> = param.split_whitespace().collect();
    let bits = |word: &str| word.strip_prefix(".b").and_then(|n| n.parse::<u32>().ok());
    match words.as_slice() {
        [".param", width, _name] => bits(width).ok_or_else(|| format!("a parameter of no width: {param}")),
        [".param", ".align", _, width, name] => {
            let count = name.split_once('[').and_then(|(_, n)| n.trim_end_matches(']').parse::<u32>().ok());
            Ok(bits(width).zip(count).map(|(b, n)| b * n).ok_or_else(|| format!("an aggregate of no size: {param}"))?)
        }
        _ => Err(format!("not a PTX parameter: {param}")),
    }
}

/// Every function that `header` declares after the word `qualifier` at the start of a
/// line (the header's device-function prefix), with the widths of its C types on a 64-bit target.
pub fn header_functions(header: &str, qualifier: &str) -> Result<Vec<Signature>, String> {
    let marker = format!("\n{qualifier}");
    let mut found = Vec::new();
    for (at, _) in header.match_indices(&marker) {
        let rest = &header[at + marker.len()..];
        if !rest.starts_with([' ', '\n']) {
            continue;
        }
        let decl = &rest[..rest.find(';').ok_or("a declaration without its ';'")?];
        let (head, params) = decl.split_once('(').ok_or_else(|| format!("not a function: {decl}"))?;
        let (ret, name) = split_declarator(head);
        let params = match params.trim_end_matches(')').trim() {
            "" | "void" => Vec::new(),
            list => list.split(',').map(|p| c_bits(split_declarator(p).0)).collect::<Result<_, _>>()?,
        };
        let ret = match ret {
            "void" => None,
            ty => Some(c_bits(ty)?),
        };
        found.push(Signature { name: name.to_string(), ret, params });
    }
    Ok(found)
}

/// A C declarator's type and name: `const void *addr` is (`const void *`, `addr`).
fn split_declarator(decl: &str) -> (&str, &str) {
    let decl = decl.trim();
    let name_at = decl.trim_end_matches(|c: char| c.is_ascii_alphanumeric() || c == '_').len();
    (decl[..name_at].trim(), &decl[name_at..])
}

/// The bits of a C type as the header writes it (pointers and 64-bit integers: 64).
fn c_bits(ty: &str) -> Result<u32, String> {
    let ty = ty.trim();
    if ty.ends_with('*') {
        return Ok(64);
    }
    match ty {
        "size_t" | "uint64_t" | "int64_t" | "double" => Ok(64),
        "uint32_t" | "int32_t" | "float" | "ferroccl_status" => Ok(32),
        _ => Err(format!("a C type of unknown width: {ty}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = "\
.visible .func  (.param .b32 func_retval0) ferroccl_a(
\t.param .b64 ferroccl_a_param_0,
\t.param .b32 ferroccl_a_param_1
)
{
}
.visible .func ferroccl_b(
\t.param .b64 ferroccl_b_param_0
)
.visible .func  (.param .b64 func_retval0) ferroccl_c(
\t.param .align 8 .b8 ferroccl_c_param_0[64]
)
.weak .func  (.param .b32 func_retval0) ferroccl_w
(
\t.param .b32 ferroccl_w_param_0
)
;
.visible .entry other(
)
.weak .func  (.param .b32 func_retval0) ferroccl_w(
\t.param .b32 ferroccl_w_param_0
)
{
}
.func ferroccl_internal(
)
";

    const HEADER: &str = "\
#define DEV
DEV
ferroccl_status ferroccl_a(const ferroccl_heap *heap,
                           uint32_t pe);

DEV void ferroccl_b(const ferroccl_heap *heap);
DEVICE_NOT void ferroccl_not(void);

DEV
void *ferroccl_c(const void *addr, uint32_t pe);
";

    #[test]
    fn ptx_functions_are_read_with_their_widths() {
        let got = ptx_functions(PTX, "ferroccl_").unwrap();
        assert_eq!(
            got,
            [
                Signature { name: "ferroccl_a".into(), ret: Some(32), params: vec![64, 32] },
                Signature { name: "ferroccl_b".into(), ret: None, params: vec![64] },
                Signature { name: "ferroccl_c".into(), ret: Some(64), params: vec![512] },
                Signature { name: "ferroccl_w".into(), ret: Some(32), params: vec![32] },
            ]
        );
    }

    #[test]
    fn header_declarations_are_read_with_their_widths() {
        let got = header_functions(HEADER, "DEV").unwrap();
        assert_eq!(
            got,
            [
                Signature { name: "ferroccl_a".into(), ret: Some(32), params: vec![64, 32] },
                Signature { name: "ferroccl_b".into(), ret: None, params: vec![64] },
                Signature { name: "ferroccl_c".into(), ret: Some(64), params: vec![64, 32] },
            ]
        );
    }

    #[test]
    fn an_unknown_c_type_is_an_error() {
        assert!(header_functions("\nDEV\nvoid f(struct thing x);", "DEV").is_err());
    }
}

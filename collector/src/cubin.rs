//! The functions of a cubin (a CUDA ELF image): name, offset of their code in the image, and
//! size, from its symbol table. Damaged or foreign images are errors, never panics.

/// One function of an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CubinFunction {
    /// The symbol (mangled).
    pub name: String,
    /// Where its code starts in the image, bytes.
    pub offset: u64,
    /// Its code's size, bytes.
    pub size: u64,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// A section header: (type, file offset, size, link).
fn section(b: &[u8], table: usize, size: usize, i: usize) -> Option<(u32, u64, u64, u32)> {
    let at = table.checked_add(i.checked_mul(size)?)?;
    Some((
        u32_at(b, at + 4)?,
        u64_at(b, at + 24)?,
        u64_at(b, at + 32)?,
        u32_at(b, at + 40)?,
    ))
}

/// The function symbols of `image` (64-bit little-endian ELF), in symbol-table order.
pub fn functions(image: &[u8]) -> Result<Vec<CubinFunction>, String> {
    let bad = |why: &str| format!("not a cubin: {why}");
    if image.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err(bad("no ELF magic"));
    }
    if image.get(4) != Some(&2) || image.get(5) != Some(&1) {
        return Err(bad("not 64-bit little-endian ELF"));
    }
    let shoff = u64_at(image, 0x28).ok_or_else(|| bad("short header"))? as usize;
    let shentsize = usize::from(u16_at(image, 0x3A).ok_or_else(|| bad("short header"))?);
    let shnum = usize::from(u16_at(image, 0x3C).ok_or_else(|| bad("short header"))?);
    if shentsize < 64 {
        return Err(bad("section headers too small"));
    }
    let sections: Vec<(u32, u64, u64, u32)> = (0..shnum)
        .map(|i| {
            section(image, shoff, shentsize, i).ok_or_else(|| bad("section table past the end"))
        })
        .collect::<Result<_, _>>()?;
    let Some(&(_, symoff, symsize, link)) = sections.iter().find(|s| s.0 == 2) else {
        return Err(bad("no symbol table"));
    };
    let &(_, stroff, strsize, _) = sections
        .get(link as usize)
        .ok_or_else(|| bad("symbol names past the section table"))?;
    let strtab = image
        .get(stroff as usize..(stroff as usize).saturating_add(strsize as usize))
        .ok_or_else(|| bad("symbol names past the end"))?;
    let symtab = image
        .get(symoff as usize..(symoff as usize).saturating_add(symsize as usize))
        .ok_or_else(|| bad("symbol table past the end"))?;
    let mut out = Vec::new();
    for sym in symtab.chunks_exact(24) {
        let (Some(name), Some(shndx), Some(value), Some(size)) = (
            u32_at(sym, 0),
            u16_at(sym, 6),
            u64_at(sym, 8),
            u64_at(sym, 16),
        ) else {
            continue;
        };
        if sym[4] & 0xf != 2 {
            continue; // not STT_FUNC
        }
        let Some(rest) = strtab.get(name as usize..) else {
            return Err(bad("a symbol name past its table"));
        };
        let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        let Some(&(_, base, _, _)) = sections.get(usize::from(shndx)) else {
            return Err(bad("a function in no section"));
        };
        out.push(CubinFunction {
            name: String::from_utf8_lossy(&rest[..end]).into_owned(),
            offset: base.saturating_add(value),
            size,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixture_cubins_list_their_kernels() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cubin");
        let sm90 = std::fs::read(dir.join("sass_kernels.sm_90.cubin")).unwrap();
        assert_eq!(
            functions(&sm90).unwrap(),
            vec![
                CubinFunction {
                    name: "_Z7stridedPfPKfii".into(),
                    offset: 4864,
                    size: 896,
                },
                CubinFunction {
                    name: "_Z5saxpyfPKfPfi".into(),
                    offset: 5760,
                    size: 512,
                },
            ]
        );
        // Damage: every prefix and a few flipped bytes are errors or shorter lists, never a
        // panic.
        for n in 0..sm90.len() {
            let _ = functions(&sm90[..n]);
        }
        let mut bad = sm90.clone();
        for at in [0x28, 0x3A, 0x3C, 1330, 1360] {
            bad[at] ^= 0xff;
            let _ = functions(&bad);
        }
        assert_eq!(
            functions(b"simcuda-module").unwrap_err(),
            "not a cubin: no ELF magic"
        );
    }
}

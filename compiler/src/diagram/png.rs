//! SVG → PNG with resvg. The fonts come from the caller (the binaries
//! load the system's), so this stays free of I/O; text is drawn with an
//! installed family whatever the SVG asks for, so labels never vanish.

use std::sync::Arc;

use resvg::{tiny_skia, usvg};

/// The families tried first, in order, before any installed one.
const PREFERRED: &[&str] = &[
    "DejaVu Sans",
    "Liberation Sans",
    "Noto Sans",
    "Arial",
    "Verdana",
];

/// Renders `svg` at `scale` into PNG bytes using the fonts of `fonts`.
pub fn png(svg: &str, fonts: usvg::fontdb::Database, scale: f32) -> Result<Vec<u8>, String> {
    let family = PREFERRED
        .iter()
        .find(|f| {
            fonts
                .faces()
                .any(|face| face.families.iter().any(|(name, _)| name == *f))
        })
        .map(|f| (*f).to_owned())
        .or_else(|| {
            fonts
                .faces()
                .next()
                .and_then(|face| face.families.first().map(|(n, _)| n.clone()))
        })
        .ok_or("no font is installed, so labels cannot be drawn (install fonts-dejavu-core)")?;
    let mut fonts = fonts;
    fonts.set_sans_serif_family(family.clone());
    fonts.set_serif_family(family.clone());
    let options = usvg::Options {
        font_family: family,
        fontdb: Arc::new(fonts),
        ..usvg::Options::default()
    };
    let tree =
        usvg::Tree::from_str(svg, &options).map_err(|e| format!("the SVG does not parse: {e}"))?;
    let size = tree
        .size()
        .to_int_size()
        .scale_by(scale)
        .ok_or("the drawing is empty")?;
    let mut pixmap =
        tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("the drawing is too large")?;
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| format!("cannot encode the PNG: {e}"))
}

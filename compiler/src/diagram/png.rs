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

/// The most pixels a PNG may have (about 160 MB of pixmap): past it the
/// drawing is refused before anything is allocated.
pub const MAX_PIXELS: u64 = 40_000_000;

/// Why a PNG was not drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PngError {
    /// It would have more than [`MAX_PIXELS`].
    TooLarge {
        /// Its width in pixels.
        width: u32,
        /// Its height in pixels.
        height: u32,
    },
    /// No font, an SVG that does not parse, an encoding failure.
    Failed(String),
}

impl std::fmt::Display for PngError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PngError::TooLarge { width, height } => write!(
                f,
                "the drawing would be {width}x{height} pixels, more than {MAX_PIXELS}; \
                 ask for svg or mermaid"
            ),
            PngError::Failed(why) => f.write_str(why),
        }
    }
}

impl From<&str> for PngError {
    fn from(why: &str) -> PngError {
        PngError::Failed(why.to_owned())
    }
}

/// Renders `svg` at `scale` into PNG bytes using the fonts of `fonts`.
pub fn png(svg: &str, fonts: usvg::fontdb::Database, scale: f32) -> Result<Vec<u8>, PngError> {
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
    let tree = usvg::Tree::from_str(svg, &options)
        .map_err(|e| PngError::Failed(format!("the SVG does not parse: {e}")))?;
    let size = tree
        .size()
        .to_int_size()
        .scale_by(scale)
        .ok_or("the drawing is empty")?;
    let pixels = u64::from(size.width()) * u64::from(size.height());
    if pixels > MAX_PIXELS {
        return Err(PngError::TooLarge {
            width: size.width(),
            height: size.height(),
        });
    }
    let mut pixmap =
        tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("the drawing is too large")?;
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap
        .encode_png()
        .map_err(|e| PngError::Failed(format!("cannot encode the PNG: {e}")))
}

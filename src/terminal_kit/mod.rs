//! The terminal kit both screens use, the monitor (`tui`) and the cluster view
//! (`cluster::screen`): taking the terminal over and restoring it on every path (`guard`),
//! drawing only the cells that changed (`cell_diff`, `frame_writer`, with the symbols known
//! to be one column wide: `narrow`), signals and keys as
//! events on the screen's channel (`signals`, `input`), the start-up they share in its order
//! (`start`), the colours and glyphs (`theme`), sparklines and bars (`sparkline`), the `/` filter
//! (`filter`) and the clock (`clock`). Nothing here
//! knows either screen: both import it, it imports neither.

mod cell_diff;
pub mod clock;
pub mod filter;
mod frame_writer;
pub(crate) mod guard;
pub(crate) mod input;
pub(crate) mod narrow;
pub(crate) mod signals;
pub mod sparkline;
pub(crate) mod start;
pub mod theme;

//! Why a story failed, said once more after the output a failing story prints on its way out.
//!
//! A story that drops a partner (a container, a process) prints that partner's log while it
//! unwinds, after the panic message: in a long CI log the reason then sits in the middle of it,
//! where a truncated log loses it. [`remember_panics`] keeps each thread's last panic message so
//! such a partner can repeat it after its log ([`last_panic`]).
//!
//! Owns: one panic hook that records and then delegates. Must not touch: the message itself or
//! where the default hook prints it.

use std::cell::RefCell;
use std::sync::Once;

thread_local! {
    static LAST: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once per process) the hook that records each panic's message and location for its
/// thread, then calls the hook that was installed before.
pub fn remember_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let at = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()))
                .unwrap_or_default();
            LAST.with(|last| *last.borrow_mut() = Some(format!("{at}: {message}")));
            previous(info);
        }));
    });
}

/// The message of the last panic on this thread (with [`remember_panics`] installed).
pub fn last_panic() -> Option<String> {
    LAST.with(|last| last.borrow().clone())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_panic_is_remembered_on_its_thread() {
        super::remember_panics();
        let caught = std::panic::catch_unwind(|| panic!("the reason {}", 42));
        assert!(caught.is_err());
        let last = super::last_panic().unwrap();
        assert!(last.ends_with(": the reason 42"), "{last}");
        assert!(last.contains("why.rs:"), "{last}");
    }
}

//! The lab library behind `fleet-lab`.

//! The expansion of both attributes, on `proc_macro2` tokens so that the
//! unit tests (`expand/tests.rs`) can run it outside a compiler invocation.
//!
//! Both attributes turn `async fn name() -> R { body }` into
//!
//! ```text
//! fn name() -> R {
//!     async fn name() -> R { body }
//!     ::deliloop::Looper::builder() /* options */ .build().expect(..).block_on(name())
//! }
//! ```
//!
//! The body stays in an `async fn` of its own, with the user's signature:
//! `return` and `?` in it see the declared return type, exactly as in the
//! function the user wrote. Inside the outer function the inner item
//! shadows it, so `name()` there is the inner one. Every path starts with
//! `::deliloop`, so the expansion needs no dependency but `deliloop`.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned, ToTokens};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Error, Expr, ExprLit, ItemFn, Lit, Meta, MetaNameValue, Token};

/// Which attribute is expanding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Main,
    Test,
}

impl Kind {
    /// The attribute as users write it, for error messages.
    fn name(self) -> &'static str {
        match self {
            Kind::Main => "#[deliloop::main]",
            Kind::Test => "#[deliloop::test]",
        }
    }
}

/// The `Builder` options an attribute sets; `None` keeps the default.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    start_paused: Option<bool>,
    budget: Option<usize>,
}

/// What the options list accepts, for the unknown-option error.
const ACCEPTED: &str = "`start_paused = true|false` and `budget = <integer at least 1>`";

/// Expands `item` under `kind` with the options `args`; a misuse becomes a
/// `compile_error!` spanned at what is wrong.
pub(crate) fn expand(kind: Kind, args: TokenStream, item: TokenStream) -> TokenStream {
    match try_expand(kind, args, item.clone()) {
        Ok(tokens) => tokens,
        Err(e) => {
            let error = e.to_compile_error();
            // A refused `main` still leaves a `fn main`, so the error above
            // is the only one the user sees (no "`main` function not found").
            let stub = match (kind, syn::parse2::<ItemFn>(item)) {
                (Kind::Main, Ok(f)) => {
                    let ident = f.sig.ident;
                    quote!(#[allow(dead_code)] fn #ident() {})
                }
                _ => TokenStream::new(),
            };
            quote!(#error #stub)
        }
    }
}

fn try_expand(kind: Kind, args: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let options = parse_options(kind, args)?;
    let item: ItemFn = syn::parse2(item).map_err(|e| {
        Error::new(
            e.span(),
            format!("{} applies to an `async fn`: {e}", kind.name()),
        )
    })?;
    check_signature(kind, &item)?;

    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = item;
    let ident = &sig.ident;
    let output = &sig.output;
    let mut outer = sig.clone();
    outer.asyncness = None;

    let start_paused = options.start_paused.map(|on| quote!(.start_paused(#on)));
    let budget = options.budget.map(|n| quote!(.budget(#n)));
    // The test harness's own attribute, by a path no user item can shadow.
    let test_attr = (kind == Kind::Test).then(|| quote!(#[::core::prelude::v1::test]));
    // The call is spanned at the signature so that a failure to build the
    // looper points at the attributed function.
    let run = quote_spanned! {sig.span()=>
        ::deliloop::Looper::builder()
            #start_paused
            #budget
            .build()
            .expect("deliloop: cannot create a Looper")
            .block_on(#ident())
    };
    Ok(quote! {
        #test_attr
        #(#attrs)*
        #vis #outer {
            async fn #ident() #output #block
            #run
        }
    })
}

/// Parses `name = value, ...`; every error names the option at fault.
fn parse_options(kind: Kind, args: TokenStream) -> syn::Result<Options> {
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(args)?;
    let mut options = Options::default();
    for meta in metas {
        let nv = match meta {
            Meta::NameValue(nv) => nv,
            other => {
                let name = path_name(other.path());
                return Err(Error::new_spanned(
                    other,
                    format!(
                        "{}: option `{name}` needs a value, as in `{name} = ...`; \
                         the options are {ACCEPTED}",
                        kind.name()
                    ),
                ));
            }
        };
        let name = path_name(&nv.path);
        match name.as_str() {
            "start_paused" => set(&mut options.start_paused, &nv, bool_value(kind, &nv)?)?,
            "budget" => set(&mut options.budget, &nv, budget_value(kind, &nv)?)?,
            _ => {
                return Err(Error::new_spanned(
                    &nv.path,
                    format!(
                        "{}: unknown option `{name}`; the options are {ACCEPTED}",
                        kind.name()
                    ),
                ))
            }
        }
    }
    Ok(options)
}

fn path_name(path: &syn::Path) -> String {
    path.to_token_stream().to_string().replace(' ', "")
}

/// Stores an option, refusing a second value for it.
fn set<T>(slot: &mut Option<T>, nv: &MetaNameValue, value: T) -> syn::Result<()> {
    if slot.is_some() {
        return Err(Error::new_spanned(
            &nv.path,
            format!("option `{}` is given twice", path_name(&nv.path)),
        ));
    }
    *slot = Some(value);
    Ok(())
}

fn bool_value(kind: Kind, nv: &MetaNameValue) -> syn::Result<bool> {
    match &nv.value {
        Expr::Lit(ExprLit {
            lit: Lit::Bool(b), ..
        }) => Ok(b.value),
        other => Err(Error::new_spanned(
            other,
            format!(
                "{}: option `start_paused` takes `true` or `false`, not `{}`",
                kind.name(),
                other.to_token_stream()
            ),
        )),
    }
}

fn budget_value(kind: Kind, nv: &MetaNameValue) -> syn::Result<usize> {
    let wrong = |what: &dyn ToTokens| {
        Error::new_spanned(
            what,
            format!(
                "{}: option `budget` takes an integer of at least 1, not `{}`",
                kind.name(),
                what.to_token_stream()
            ),
        )
    };
    match &nv.value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(n), ..
        }) => match n.base10_parse::<usize>() {
            Ok(v) if v >= 1 => Ok(v),
            _ => Err(wrong(n)),
        },
        other => Err(wrong(other)),
    }
}

/// Refuses what the expansion cannot run: a non-async fn, arguments,
/// generics, and for tests a second `#[test]`.
fn check_signature(kind: Kind, item: &ItemFn) -> syn::Result<()> {
    let sig = &item.sig;
    if sig.asyncness.is_none() {
        return Err(Error::new_spanned(
            sig.fn_token,
            format!(
                "{} needs an `async fn`: write `async fn {}`",
                kind.name(),
                sig.ident
            ),
        ));
    }
    if !sig.inputs.is_empty() {
        return Err(Error::new_spanned(
            &sig.inputs,
            format!(
                "{}: `{}` must take no arguments (the {} calls it with none)",
                kind.name(),
                sig.ident,
                match kind {
                    Kind::Main => "process",
                    Kind::Test => "test harness",
                }
            ),
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(Error::new_spanned(
            &sig.generics,
            format!("{}: `{}` cannot be generic", kind.name(), sig.ident),
        ));
    }
    if kind == Kind::Test {
        if let Some(attr) = item.attrs.iter().find(|a| is_test_attr(a)) {
            return Err(Error::new_spanned(
                attr,
                "#[deliloop::test] already makes the function a `#[test]`; remove this one",
            ));
        }
    }
    Ok(())
}

/// `#[test]` or a path ending in `test` with no arguments (`#[core::prelude::v1::test]`).
fn is_test_attr(attr: &syn::Attribute) -> bool {
    matches!(&attr.meta, Meta::Path(p) if p.segments.last().is_some_and(|s| s.ident == "test"))
}

#[cfg(test)]
mod tests;

//! The attributes the `agentic` crate re-exports, so that a program needs no dependency but
//! `agentic`: `#[agentic::main]` starts the async runtime (and serves code mode's sandbox
//! when the process is one of its workers), `#[agentic::tool]` turns an async function into a
//! tool whose input schema comes from its parameters.
#![forbid(unsafe_code)]

use proc_macro::TokenStream;
use quote::{format_ident, quote};
use syn::parse::Parser as _;
use syn::punctuated::Punctuated;
use syn::{
    Expr, ExprLit, FnArg, ItemFn, Lit, Meta, Pat, ReturnType, Token, Type, parse_macro_input,
};

/// Runs an `async fn main` on a multi-threaded Tokio runtime, after serving code mode's
/// sandbox if this process was started as one of its workers.
#[proc_macro_attribute]
pub fn main(arguments: TokenStream, item: TokenStream) -> TokenStream {
    if !arguments.is_empty() {
        return syn::Error::new(
            proc_macro2::Span::call_site(),
            "#[agentic::main] takes no arguments",
        )
        .to_compile_error()
        .into();
    }
    let function = parse_macro_input!(item as ItemFn);
    if function.sig.asyncness.is_none() {
        return syn::Error::new_spanned(
            function.sig.fn_token,
            "#[agentic::main] goes on an `async fn main`",
        )
        .to_compile_error()
        .into();
    }
    let attributes = &function.attrs;
    let visibility = &function.vis;
    let name = &function.sig.ident;
    let output = &function.sig.output;
    let body = &function.block;
    quote! {
        #(#attributes)*
        #visibility fn #name() #output {
            ::agentic::run_worker_if_requested();
            ::agentic::__private::tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .expect("could not start the Tokio runtime")
                .block_on(async move #body)
        }
    }
    .into()
}

/// Turns `async fn name(parameters) -> T` into `fn name() -> agentic::FnTool`: the tool's id is
/// the function's name (or `id = "…"`), its description the doc comment, its input an object
/// with one field per parameter, its output `T` (or the `Ok` of a `Result`, whose `Err` the
/// model reads as the tool's error).
#[proc_macro_attribute]
pub fn tool(arguments: TokenStream, item: TokenStream) -> TokenStream {
    let function = parse_macro_input!(item as ItemFn);
    match expand_tool(arguments.into(), function) {
        Ok(tokens) => tokens.into(),
        Err(error) => error.to_compile_error().into(),
    }
}

fn expand_tool(
    arguments: proc_macro2::TokenStream,
    function: ItemFn,
) -> syn::Result<proc_macro2::TokenStream> {
    let mut id = function.sig.ident.to_string();
    let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(arguments)?;
    for meta in metas {
        match meta {
            Meta::NameValue(pair) if pair.path.is_ident("id") => match pair.value {
                Expr::Lit(ExprLit {
                    lit: Lit::Str(text),
                    ..
                }) => id = text.value(),
                other => {
                    return Err(syn::Error::new_spanned(
                        other,
                        "id takes a string: id = \"weather.today\"",
                    ));
                }
            },
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    "#[agentic::tool] knows one argument: id = \"…\"",
                ));
            }
        }
    }
    if function.sig.asyncness.is_none() {
        return Err(syn::Error::new_spanned(
            function.sig.fn_token,
            "#[agentic::tool] goes on an `async fn`",
        ));
    }
    let description = doc_text(&function.attrs);
    if description.is_empty() {
        return Err(syn::Error::new_spanned(
            &function.sig.ident,
            "a tool needs a doc comment: the model reads it to know when to call the tool",
        ));
    }
    let mut names = Vec::new();
    let mut types = Vec::new();
    for argument in &function.sig.inputs {
        let FnArg::Typed(typed) = argument else {
            return Err(syn::Error::new_spanned(
                argument,
                "a tool is a free function, not a method",
            ));
        };
        let Pat::Ident(pattern) = &*typed.pat else {
            return Err(syn::Error::new_spanned(
                &typed.pat,
                "name each parameter: it is a field of the tool's input",
            ));
        };
        names.push(pattern.ident.clone());
        types.push((*typed.ty).clone());
    }
    let returns_result = match &function.sig.output {
        ReturnType::Type(_, ty) => is_result(ty),
        ReturnType::Default => false,
    };
    let visibility = &function.vis;
    let name = &function.sig.ident;
    let attributes: Vec<_> = function
        .attrs
        .iter()
        .filter(|attribute| !attribute.path().is_ident("doc"))
        .collect();
    let inner = format_ident!("__{}_body", name);
    let mut body_function = function.clone();
    body_function.sig.ident = inner.clone();
    body_function.vis = syn::Visibility::Inherited;
    body_function.attrs.clear();
    let call = quote! { #inner(#(input.#names),*).await };
    let result = if returns_result {
        quote! { #call.map_err(::agentic::ToolError::failed) }
    } else {
        quote! { ::core::result::Result::<_, ::agentic::ToolError>::Ok(#call) }
    };
    Ok(quote! {
        #[doc = #description]
        #(#attributes)*
        #visibility fn #name() -> ::agentic::FnTool {
            #[derive(::agentic::__private::serde::Deserialize, ::agentic::__private::schemars::JsonSchema)]
            #[serde(crate = "::agentic::__private::serde", deny_unknown_fields)]
            #[schemars(crate = "::agentic::__private::schemars")]
            struct Input {
                #(#names: #types,)*
            }
            #body_function
            ::agentic::define_tool(#id, #description, |_context, input: Input| async move {
                #result
            })
        }
    })
}

/// The doc comment's lines, joined.
fn doc_text(attributes: &[syn::Attribute]) -> String {
    let lines: Vec<String> = attributes
        .iter()
        .filter(|attribute| attribute.path().is_ident("doc"))
        .filter_map(|attribute| match &attribute.meta {
            Meta::NameValue(pair) => match &pair.value {
                Expr::Lit(ExprLit {
                    lit: Lit::Str(text),
                    ..
                }) => Some(text.value().trim().to_owned()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    lines.join(" ").trim().to_owned()
}

/// Whether the return type is written `Result<…>` (any path ending in `Result`).
fn is_result(ty: &Type) -> bool {
    match ty {
        Type::Path(path) => path
            .path
            .segments
            .last()
            .is_some_and(|segment| segment.ident == "Result"),
        _ => false,
    }
}

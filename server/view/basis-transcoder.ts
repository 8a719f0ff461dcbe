/**
 * three's Basis Universal transcoder (examples/jsm/libs/basis/basis_transcoder.js) made runnable under
 * the viewer's CSP. It is an Emscripten embind build: at start-up it writes each binding's JS glue
 * as source text and compiles it with the `Function` constructor, which `script-src` without
 * 'unsafe-eval' forbids — in KTX2Loader's blob: worker too, which inherits the page's policy — so
 * the worker died on its first binding and every KTX2 texture (and the model) waited forever.
 * The two generators are replaced by closures doing what the generated code does (embind's own
 * DYNAMIC_EXECUTION=0 shape); the page's CSP stays without 'unsafe-eval'. A transcoder whose text
 * no longer has these exact sites (a three upgrade) is refused with a message, not served broken.
 */

/** `craftInvokerFunction`: calls a C++ function or method with its arguments converted to wire types. */
const INVOKER_SITE = 'var invokerFn=newFunc(Function,args)(...closureArgs);';
const INVOKER = [
  'var invokerFn=function(...a){',
  'if(a.length!==argCount-2){throwBindingError("function "+humanName+" called with "+a.length+" arguments, expected "+(argCount-2))}',
  'var destructors=needsDestructorStack?[]:null;var wired=[];',
  'if(isClassMethodFunc)wired.push(argTypes[1]["toWireType"](destructors,this));',
  'for(var i=0;i<argCount-2;++i)wired.push(argTypes[i+2]["toWireType"](destructors,a[i]));',
  'var rv=cppInvokerFunc(cppTargetFunc,...wired);',
  'if(needsDestructorStack){runDestructors(destructors)}else{',
  'for(var i=isClassMethodFunc?1:2;i<argCount;++i){if(argTypes[i].destructorFunction!==null)argTypes[i].destructorFunction(wired[isClassMethodFunc?i-1:i-2])}}',
  'if(returns)return argTypes[0]["fromWireType"](rv)};',
].join('');

/** `__emval_get_method_caller`: C++ calling a JS function, method or constructor (kind 1: `new`). */
const METHOD_CALLER_SITE = 'var invokerFunction=newFunc(Function,params)(...args);';
const METHOD_CALLER = [
  'var invokerFunction=function(obj,func,destructorsRef,argsPtr){',
  'var list=kind===0?[obj]:[];var offset=0;',
  'for(var i=0;i<argCount;++i){list.push(types[i].readValueFromPointer(argsPtr+offset));offset+=types[i]["argPackAdvance"]}',
  'var rv=kind===1?new func(...list):func.call(...list);',
  'if(!retType.isVoid)return emval_returnValue(retType,destructorsRef,rv)};',
].join('');

/** The global object without `Function("return this")` (only reached where `globalThis` is missing). */
const GLOBAL_SITE = 'return function(){return Function}()("return this")()';
const GLOBAL = 'return self';

/** The transcoder's source with its runtime code generation replaced; throws when a site is not found exactly once. */
export function basisTranscoderWithoutEval(source: string): string {
  let out = source;
  for (const [site, replacement] of [
    [INVOKER_SITE, INVOKER],
    [METHOD_CALLER_SITE, METHOD_CALLER],
    [GLOBAL_SITE, GLOBAL],
  ] as const) {
    const parts = out.split(site);
    if (parts.length !== 2) {
      throw new Error(
        `basis_transcoder.js: expected one "${site}" (found ${parts.length - 1}); this three version's transcoder needs a new CSP patch`,
      );
    }
    out = parts.join(replacement);
  }
  if (/newFunc\(Function\b|\bnew Function\b|\beval\(/.test(out)) throw new Error('basis_transcoder.js still generates code at run time');
  return out;
}

#!/usr/bin/env node
// Code statistics for the closing notes of housekeeping work: source lines over the line limit,
// the longest functions (TypeScript compiler API, so arrow functions and methods count too) and
// small helpers defined more than once.
// Usage: node scripts/code-stats.mjs [root=.] [--top=10] [--limit=140]
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const args = process.argv.slice(2);
const root = args.find((arg) => !arg.startsWith('--')) ?? '.';
const option = (name, fallback) => Number(args.find((arg) => arg.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
const top = option('top', 10);
const limit = option('limit', 140);
const skippedDirectories = new Set(['node_modules', 'dist', '.git', '.bench', 'data', 'content', 'state']);

function* sourceFiles(directory) {
  for (const name of readdirSync(directory).sort()) {
    const path = join(directory, name);
    if (statSync(path).isDirectory()) {
      if (!skippedDirectories.has(name)) yield* sourceFiles(path);
    } else if (/\.(ts|mts|mjs)$/.test(name) && !name.endsWith('.d.ts')) {
      yield path;
    }
  }
}

function functionName(node) {
  if (node.name) return node.name.getText();
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) {
    return parent.name.getText();
  }
  return '(anonymous)';
}

const longLines = [];
const functions = [];
const topLevelFunctions = new Map();
for (const path of sourceFiles(root)) {
  const file = relative(root, path);
  const text = readFileSync(path, 'utf8');
  text.split('\n').forEach((line, index) => {
    if (line.length > limit) longLines.push({ file, line: index + 1, length: line.length });
  });
  const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const visit = (node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      functions.push({ file, name: functionName(node), line: start + 1, lines: end - start + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  // Helpers are module-level functions (declarations or const arrows); the same name in several files is a candidate copy.
  for (const statement of source.statements) {
    const names = [];
    if (ts.isFunctionDeclaration(statement) && statement.name) names.push(statement.name.text);
    if (ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations) {
        const init = declaration.initializer;
        if (init && (ts.isArrowFunction(init) || ts.isFunctionExpression(init))) names.push(declaration.name.getText());
      }
    }
    for (const name of names) topLevelFunctions.set(name, [...(topLevelFunctions.get(name) ?? []), file]);
  }
}

longLines.sort((a, b) => b.length - a.length);
console.log(`Lines over ${limit} characters: ${longLines.length} (longest ${longLines[0]?.length ?? 0})`);
const perDirectory = new Map();
for (const { file } of longLines) perDirectory.set(file.split('/')[0], (perDirectory.get(file.split('/')[0]) ?? 0) + 1);
console.log(`  by top directory: ${[...perDirectory].map(([directory, count]) => `${directory} ${count}`).join(', ')}`);
const perFile = new Map();
for (const { file } of longLines) perFile.set(file, (perFile.get(file) ?? 0) + 1);
for (const [file, count] of [...perFile].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`  ${count}\t${file}`);

functions.sort((a, b) => b.lines - a.lines);
console.log(`\nLongest functions (top ${top}):`);
for (const { file, name, line, lines } of functions.slice(0, top)) console.log(`  ${lines}\t${file}:${line} ${name}`);

const copies = [...topLevelFunctions].filter(([, files]) => files.length > 1).sort((a, b) => b[1].length - a[1].length);
console.log(`\nModule-level functions defined in more than one file: ${copies.length}`);
for (const [name, files] of copies) console.log(`  ${name} ×${files.length}: ${files.join(', ')}`);

// map.png from map.svg with @resvg/resvg-js, where it can be loaded: a devDependency, so a clone
// of forkflush has it, and neither the bundled CLI nor the Action carries its native binary. The
// CLI and the GitHub map job both ask here, and say what the note says when there is none.
import { readFile, writeFile } from 'node:fs/promises';

/** The PNG's path, or a note saying why there is none and how to make one. */
export async function renderPng(svgFile: string, pngFile: string): Promise<{ file: string } | { note: string }> {
  const name = '@resvg/resvg-js';
  let Resvg: new (svg: string, o: object) => { render(): { asPng(): Uint8Array } };
  try {
    ({ Resvg } = await import(name));
  } catch {
    return {
      note: `no map.png: its renderer (${name}) is not installed here; open map.svg, or install it beside forkflush (npm install -g ${name}) and run forkflush map again`,
    };
  }
  const png = new Resvg(await readFile(svgFile, 'utf8'), { fitTo: { mode: 'zoom', value: 1.5 } }).render().asPng();
  await writeFile(pngFile, png);
  return { file: pngFile };
}

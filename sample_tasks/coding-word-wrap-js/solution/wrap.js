'use strict';

function wrapParagraph(words, width) {
  const lines = [];
  let current = '';
  for (let word of words) {
    if (current !== '' && current.length + 1 + word.length <= width) {
      current += ' ' + word;
      continue;
    }
    if (current !== '') {
      lines.push(current);
      current = '';
    }
    while (word.length > width) {
      lines.push(word.slice(0, width));
      word = word.slice(width);
    }
    current = word;
  }
  if (current !== '') lines.push(current);
  return lines.join('\n');
}

/** Re-flow `text` to lines of at most `width` characters. See prompt.md. */
function wrap(text, width) {
  if (typeof text !== 'string') throw new TypeError('text must be a string');
  if (!Number.isInteger(width) || width < 1) throw new RangeError('width must be an integer >= 1');
  const paragraphs = [];
  let words = [];
  for (const line of text.split('\n')) {
    const lineWords = line.split(/[ \t]+/).filter((w) => w !== '');
    if (lineWords.length === 0) {
      if (words.length > 0) paragraphs.push(words);
      words = [];
    } else {
      words.push(...lineWords);
    }
  }
  if (words.length > 0) paragraphs.push(words);
  return paragraphs.map((p) => wrapParagraph(p, width)).join('\n\n');
}

module.exports = { wrap };

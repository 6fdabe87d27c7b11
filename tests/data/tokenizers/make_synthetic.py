#!/usr/bin/env python3
"""Writes synthetic/*.json: tiny tokenizer.json files that exercise pipeline parts the real
tokenizers do not (Prepend, Strip, unk/fuse_unk, lstrip/rstrip/single_word/normalized added
tokens, every Split behavior, ignore_merges, merges as pairs, no decoder). With `tokenizers`
installed it also prints what Hugging Face encodes, which tests/tokenizer/synthetic_pipeline_test.cpp
states literally.

    pip install tokenizers==0.23.2 && python3 make_synthetic.py
"""
import json
import os

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), "synthetic"))
# SentencePiece-style
chars = ["▁","h","e","l","o","w","r","d","a","b","x","[","]"]
vocab = {"<unk>":0,"<s>":1,"</s>":2,"<0xE2>":3,"<0x82>":4,"<0xAC>":5}
for c in chars: vocab[c]=len(vocab)
merges=[("▁","h"),("e","l"),("el","l"),("h","ell"),("▁h","ell"),("▁hell","o"),("o","w"),("▁","w"),("▁w","o"),("▁wo","r"),("r","l"),("▁wor","l"),("▁worl","d"),("a","b"),("▁","a")]
for a,b in merges:
    if a+b not in vocab: vocab[a+b]=len(vocab)
vocab["[MASK]"]=len(vocab)
sp = {
 "version":"1.0","truncation":None,"padding":None,
 "added_tokens":[
  {"id":0,"content":"<unk>","single_word":False,"lstrip":False,"rstrip":False,"normalized":False,"special":True},
  {"id":1,"content":"<s>","single_word":False,"lstrip":False,"rstrip":False,"normalized":False,"special":True},
  {"id":2,"content":"</s>","single_word":False,"lstrip":False,"rstrip":False,"normalized":False,"special":True},
  {"id":vocab["[MASK]"],"content":"[MASK]","single_word":False,"lstrip":True,"rstrip":True,"normalized":False,"special":True},
  {"id":vocab["ab"],"content":"ab","single_word":True,"lstrip":False,"rstrip":False,"normalized":False,"special":False},
  {"id":len(vocab),"content":"wow","single_word":False,"lstrip":False,"rstrip":False,"normalized":True,"special":False},
 ],
 "normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]},
 "pre_tokenizer":None,
 "post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],
   "pair":[{"Sequence":{"id":"A","type_id":0}},{"Sequence":{"id":"B","type_id":1}}],
   "special_tokens":{"<s>":{"id":"<s>","ids":[1],"tokens":["<s>"]}}},
 "decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]},
 "model":{"type":"BPE","dropout":None,"unk_token":"<unk>","continuing_subword_prefix":None,"end_of_word_suffix":None,"fuse_unk":True,"byte_fallback":True,"ignore_merges":False,
   "vocab":vocab,"merges":[f"{a} {b}" for a,b in merges]}}
json.dump(sp,open("sentencepiece_bpe.json","w"),ensure_ascii=False)

# byte-level with split behaviours
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~")+1))+list(range(ord("¡"), ord("¬")+1))+list(range(ord("®"), ord("ÿ")+1))
    cs = bs[:]; n=0
    for b in range(256):
        if b not in bs: bs.append(b); cs.append(256+n); n+=1
    return dict(zip(bs,[chr(c) for c in cs]))
b2u=bytes_to_unicode()
bv={}
for b in range(256): bv[b2u[b]]=len(bv)
bm=[("Ġ","h"),("e","l"),("el","l"),("Ġh","ell"),("Ġhell","o"),("1","2"),("-","x"),("Ġ","Ġ")]
for a,b in bm:
    if a+b not in bv: bv[a+b]=len(bv)
bv["Ġworld"]=len(bv)   # reachable only through ignore_merges
bv["</s>"]=len(bv)
bl = {
 "version":"1.0","truncation":None,"padding":None,
 "added_tokens":[{"id":bv["</s>"],"content":"</s>","single_word":False,"lstrip":False,"rstrip":False,"normalized":False,"special":True}],
 "normalizer":None,
 "pre_tokenizer":{"type":"Sequence","pretokenizers":[
   {"type":"Split","pattern":{"String":"-"},"behavior":"MergedWithNext","invert":False},
   {"type":"Split","pattern":{"Regex":"\\d"},"behavior":"Contiguous","invert":False},
   {"type":"Split","pattern":{"String":"|"},"behavior":"Removed","invert":False},
   {"type":"Split","pattern":{"String":"."},"behavior":"MergedWithPrevious","invert":False},
   {"type":"ByteLevel","add_prefix_space":True,"trim_offsets":True,"use_regex":True}]},
 "post_processor":{"type":"Sequence","processors":[{"type":"ByteLevel","add_prefix_space":True,"trim_offsets":False,"use_regex":True},
   {"type":"TemplateProcessing","single":[{"Sequence":{"id":"A","type_id":0}},{"SpecialToken":{"id":"</s>","type_id":0}}],"pair":[],"special_tokens":{"</s>":{"id":"</s>","ids":[bv["</s>"]],"tokens":["</s>"]}}}]},
 "decoder":{"type":"ByteLevel","add_prefix_space":True,"trim_offsets":True,"use_regex":True},
 "model":{"type":"BPE","dropout":None,"unk_token":None,"continuing_subword_prefix":None,"end_of_word_suffix":None,"fuse_unk":False,"byte_fallback":False,"ignore_merges":True,
   "vocab":bv,"merges":[[a,b] for a,b in bm]}}
json.dump(bl,open("byte_level_splits.json","w"),ensure_ascii=False)
nodec=dict(bl); nodec["decoder"]=None
json.dump(nodec,open("no_decoder.json","w"),ensure_ascii=False)

from tokenizers import Tokenizer
for f,texts in [("sentencepiece_bpe.json",["hello world","hello  world €","hello ¥¥ world","x [MASK]  wow ab","ab abx xab","<s>hello</s>","wow","€",""]),
                ("byte_level_splits.json",["hello world","hello-x-world 12345 a.b.c","a|b||c","  hello","world"]),
                ("no_decoder.json",["hello world"])]:
    t=Tokenizer.from_file(f)
    print(f)
    for s in texts:
        e=t.encode(s,add_special_tokens=False); e2=t.encode(s,add_special_tokens=True)
        print("  ",json.dumps(s,ensure_ascii=False), e.ids, e2.ids, e.tokens, json.dumps(t.decode(e.ids,skip_special_tokens=False),ensure_ascii=False), json.dumps(t.decode(e2.ids,skip_special_tokens=True),ensure_ascii=False))

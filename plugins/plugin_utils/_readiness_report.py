# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# PRIVATE to the gpufleet.nodeprep collection; may change in any release.
#
# The controller side of readiness: build_report() gathers the per-host results
# of readiness_info into one report, and render_json() / render_junit() /
# render_html() / render_text() / render_matrix() / render_prometheus() /
# render_exit_status() write it. Only the action
# plugin plugins/action/readiness_report.py imports this file, so none of it is
# shipped to the managed nodes (module_utils are). The checks themselves, their
# ids and remedies live in plugins/module_utils/rules/_readiness.py.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import calendar
import json
import re
import time

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._readiness import (
    CHECK_IDS,
    FAIL,
    PASS,
    SKIP,
    STATUSES,
    UNREACHABLE,
    WARN,
    summarize,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._readiness_textfile import (
    label_value,
    render_families,
)


def step_limit_words(result):
    """What a result stopped by Ansible's task ``timeout`` (the whole step's limit, ``nodeprep_gather_timeout``)
    adds to its message: the limit and the variable that sets it; '' for any other result."""
    timedout = result.get('timedout') if isinstance(result, dict) else None
    if not isinstance(timedout, dict) or timedout.get('period') is None:
        return ''
    return ' (the limit of the whole step passed: {0} s, nodeprep_gather_timeout)'.format(timedout['period'])


def build_report(hosts, results, generated, unreachable=None):
    """The report as one dict: ``{generated, summary, check_ids, hosts: {name: {status, msg, checks}}}``.

    ``hosts`` lists every host of the play, in order. ``results`` maps a host to what readiness_info returned
    (``checks``); a host without a result, or whose result says ``unreachable``, is ``unreachable``
    (``unreachable`` may give the reason per host).
    A result with ``failed`` but no checks (the gather failed) becomes a host with one failed ``facts.gather``.
    """
    unreachable = unreachable or {}
    out_hosts = {}
    order = []
    summary = {'hosts': 0, 'ready': 0, 'not_ready': 0, 'unreachable': 0}
    summary.update((status, 0) for status in STATUSES)
    for host in hosts:
        if host in out_hosts:
            continue
        order.append(host)
        summary['hosts'] += 1
        result = results.get(host)
        if not result or host in unreachable or result.get('unreachable'):
            reason = (unreachable.get(host) or (result or {}).get('msg')
                      or 'no result: the host was unreachable or failed before the check')
            out_hosts[host] = {'status': UNREACHABLE, 'msg': str(reason), 'checks': [], 'values': []}
            summary['unreachable'] += 1
            continue
        checks = result.get('checks') or []
        if not checks:
            checks = [{'id': 'facts.gather', 'status': FAIL, 'expected': 'facts gathered',
                       'observed': str(result.get('msg') or 'the check returned nothing') + step_limit_words(result),
                       'remedy': 'read the error; run playbooks/readiness.yml with -vvv on this host'}]
        counts = summarize(checks)
        for status in STATUSES:
            summary[status] += counts[status]
        host_status = 'not_ready' if counts['status'] == FAIL else 'ready'
        summary[host_status] += 1
        out_hosts[host] = {'status': host_status, 'worst': counts['status'], 'msg': '',
                           'checks': [dict((k, c.get(k)) for k in ('id', 'status', 'expected', 'observed', 'remedy'))
                                      for c in checks],
                           'values': [[str(pair[0]), str(pair[1])] for pair in (result.get('values') or [])
                                      if isinstance(pair, (list, tuple)) and len(pair) == 2]}
    check_ids = list(CHECK_IDS)
    for host in order:
        for check in out_hosts[host]['checks']:
            if check['id'] not in check_ids:
                check_ids.append(check['id'])
    report = {'generated': generated, 'summary': summary, 'check_ids': check_ids, 'host_order': order,
              'hosts': out_hosts}
    report['by_check'] = by_check(report)
    report['exit_status'] = exit_status(report)
    return report


def render_json(report):
    return json.dumps(report, indent=2, sort_keys=True) + '\n'


_XML_ESCAPES = (('&', '&amp;'), ('<', '&lt;'), ('>', '&gt;'), ('"', '&quot;'), ("'", '&#x27;'))
# What XML 1.0 forbids even as a character reference (its production Char, https://www.w3.org/TR/xml/#charsets): C0
# controls but tab, line feed and carriage return; lone surrogates; U+FFFE and U+FFFF.  They are written out visibly
# (\x1b, \ufffe) instead, so a host name or an observed text holding one keeps junit.xml well-formed.
_NOT_XML_CHAR = re.compile('[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]')


def _visible(match):
    code = ord(match.group(0))
    return '\\x{0:02x}'.format(code) if code < 0x100 else '\\u{0:04x}'.format(code)


def xml_chars(text):
    """``text`` with every character XML 1.0 does not allow written as a visible escape (``\\x1b``)."""
    return _NOT_XML_CHAR.sub(_visible, text)


def _escape(text):
    """Text safe inside XML/HTML element content and double-quoted attributes (characters XML forbids made
    visible)."""
    text = xml_chars(str(text if text is not None else ''))
    for char, entity in _XML_ESCAPES:
        text = text.replace(char, entity)
    return text


def _xml_quoteattr(text):
    return '"{0}"'.format(_escape(text).replace('\n', '&#10;').replace('\r', '&#13;').replace('\t', '&#9;'))


def _cdata_safe(text):
    return _escape(text)


def render_junit(report):
    """JUnit XML: a testsuite per host, a testcase per check; fail -> <failure>, skip -> <skipped>,
    warn -> passed with <system-out>; an unreachable host -> one errored testcase ``host.reachable``."""
    lines = ['<?xml version="1.0" encoding="UTF-8"?>']
    summary = report['summary']
    total = sum(max(1, len(report['hosts'][h]['checks'])) for h in report['host_order'])
    lines.append('<testsuites name="gpufleet.nodeprep readiness" tests="{0}" failures="{1}" errors="{2}" '
                 'skipped="{3}" timestamp={4}>'.format(total, summary[FAIL], summary['unreachable'], summary[SKIP],
                                                       _xml_quoteattr(str(report['generated']))))
    if not report['host_order']:
        # a run that judged no host is no pass: one errored testcase, so that CI does not read it as green
        lines[-1] = lines[-1].replace('tests="0"', 'tests="1"').replace('errors="0"', 'errors="1"', 1)
        lines.append('  <testsuite name="readiness" tests="1" failures="0" errors="1" skipped="0">')
        lines.append('    <testcase classname="readiness" name="hosts.judged">')
        lines.append('      <error type="no_host" message={0}/>'.format(_xml_quoteattr(NO_HOST)))
        lines.append('    </testcase>')
        lines.append('  </testsuite>')
    for host in report['host_order']:
        entry = report['hosts'][host]
        if entry['status'] == UNREACHABLE:
            lines.append('  <testsuite name={0} tests="1" failures="0" errors="1" skipped="0">'.format(
                _xml_quoteattr(host)))
            lines.append('    <testcase classname={0} name="host.reachable">'.format(_xml_quoteattr(host)))
            lines.append('      <error type="unreachable" message={0}/>'.format(_xml_quoteattr(entry['msg'])))
            lines.append('    </testcase>')
            lines.append('  </testsuite>')
            continue
        checks = entry['checks']
        counts = summarize(checks)
        lines.append('  <testsuite name={0} tests="{1}" failures="{2}" errors="0" skipped="{3}">'.format(
            _xml_quoteattr(host), len(checks), counts[FAIL], counts[SKIP]))
        for check in checks:
            lines.append('    <testcase classname={0} name={1}>'.format(_xml_quoteattr(host),
                                                                        _xml_quoteattr(check['id'])))
            detail = 'expected: {0}\nobserved: {1}\nremedy: {2}'.format(check['expected'], check['observed'],
                                                                        check['remedy'])
            if check['status'] == FAIL:
                lines.append('      <failure type="fail" message={0}>{1}</failure>'.format(
                    _xml_quoteattr(str(check['observed'])), _cdata_safe(detail)))
            elif check['status'] == SKIP:
                lines.append('      <skipped message={0}/>'.format(_xml_quoteattr(str(check['observed']))))
            elif check['status'] == WARN:
                lines.append('      <system-out>{0}</system-out>'.format(_cdata_safe('WARN\n' + detail)))
            lines.append('    </testcase>')
        lines.append('  </testsuite>')
    lines.append('</testsuites>')
    return '\n'.join(lines) + '\n'


# ---------------------------------------------------------------------------
# what a host needs, and the exit status for scripts

# A host's state on the page, worst first: the page's order and its status filter.
HOST_STATES = (FAIL, UNREACHABLE, WARN, PASS)
_STATE_WORDS = {FAIL: 'not ready', UNREACHABLE: 'unreachable', WARN: 'ready, warnings', PASS: 'ready'}

# NHC-style exit status (report.json ``exit_status``, the file ``exit-status``, the action's ``exit_status``).
EXIT_READY = 0
EXIT_NOT_READY = 1
EXIT_NOT_CHECKED = 2
EXIT_MEANINGS = {EXIT_READY: 'every host checked and ready', EXIT_NOT_READY: 'some hosts not ready',
                 EXIT_NOT_CHECKED: 'some hosts could not be checked'}
# A report over no host (an empty inventory group, a --limit that matched nothing) proves nothing: never "ready".
NO_HOST = 'no host was judged (the play had no host): not ready'


def exit_meaning(report):
    """What the report's exit status means, in words (NO_HOST for a report over no host)."""
    if not report['host_order']:
        return NO_HOST
    return EXIT_MEANINGS[report.get('exit_status', exit_status(report))]


def is_ready(report):
    """True only when at least one host was judged and every host was checked and is ready."""
    return bool(report['host_order']) and report.get('exit_status', exit_status(report)) == EXIT_READY


def host_state(entry):
    """``fail`` (a check failed), ``unreachable`` (no result), ``warn`` (ready, a check warned) or ``pass``."""
    if entry['status'] == UNREACHABLE:
        return UNREACHABLE
    if entry['status'] == 'not_ready':
        return FAIL
    return WARN if entry.get('worst') == WARN else PASS


def not_checked(entry):
    """True for a host whose checks could not run: unreachable, or its facts could not be gathered."""
    return entry['status'] == UNREACHABLE or any(c['id'] == 'facts.gather' for c in entry['checks'])


def attention_order(report):
    """The hosts, those that need attention first: failed, unreachable, warned, ready; inventory order within each."""
    rank = dict((state, index) for index, state in enumerate(HOST_STATES))
    return sorted(report['host_order'], key=lambda host: rank[host_state(report['hosts'][host])])


def exit_status(report):
    """0 when every host was checked and is ready, 1 when a checked host is not ready, 2 when a host could not be
    checked (unreachable, or its facts gather failed) or the report has no host. 2 wins over 1: the verdict on the
    fleet is incomplete."""
    entries = [report['hosts'][host] for host in report['host_order']]
    if not entries or any(not_checked(entry) for entry in entries):
        return EXIT_NOT_CHECKED
    if any(entry['status'] == 'not_ready' for entry in entries):
        return EXIT_NOT_READY
    return EXIT_READY


def by_check(report):
    """Per check id: how many hosts had each status, and which hosts failed or warned (in report order)."""
    out = {}
    for check_id in report['check_ids']:
        row = dict((status, 0) for status in STATUSES)
        row.update(fail_hosts=[], warn_hosts=[])
        out[check_id] = row
    for host in report['host_order']:
        for check in report['hosts'][host]['checks']:
            row = out[check['id']]
            row[check['status']] = row.get(check['status'], 0) + 1
            if check['status'] in (FAIL, WARN):
                row[check['status'] + '_hosts'].append(host)
    return out


def render_exit_status(report):
    return '{0}\n'.format(report['exit_status'])


# ---------------------------------------------------------------------------
# report.html

# One class per status: the cells of the matrix and the badges. Rows carry h<state> (hf, hu, hw, hp), unstyled.
_CELLS = {PASS: ('p', 'ok'), WARN: ('w', 'warn'), FAIL: ('f', 'fail'), SKIP: ('s', 'skip')}
_STATE_CLASS = {FAIL: 'f', UNREACHABLE: 'u', WARN: 'w', PASS: 'p'}
_COLOURS = (('p', '#14612c', '#e3f2e6'), ('w', '#7a4f00', '#fff1cc'), ('f', '#a1211a', '#fbe3e1'),
            ('s', '#4a4f55', '#eef0f2'), ('n', '#4a4f55', '#ffffff'), ('u', '#ffffff', '#6b2c91'))
# How many hosts the summary names per check and status; the filter by check shows them all.
SUMMARY_HOSTS = 20

_CSS = (
    'body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:20px;color:#1f2328}',
    'h1{font-size:22px;margin:0 0 4px}',
    'h2{font-size:18px;margin:22px 0 6px;padding-top:6px;border-top:2px solid #d0d7de}',
    'h3{font-size:15px;margin:14px 0 4px}',
    '.b{display:inline-block;padding:0 7px;border-radius:9px;font-weight:600;margin-right:3px}',
    'table{border-collapse:collapse;font-size:13px}',
    'th,td{border:1px solid #c8ced5;padding:3px 6px;vertical-align:top}',
    'th{background:#f3f5f7;font-weight:600;text-align:left}',
    '#checks td.n0{color:#8c959f}',
    '#checks a{white-space:nowrap}',
    '#matrix th.c{font-size:11px;max-width:80px;text-align:center;vertical-align:bottom}',
    '#matrix th.c span{display:block;color:#57606a;font-weight:400}',
    '#matrix td{text-align:center;white-space:nowrap;padding:2px 4px}',
    '#matrix td.h,#matrix td.m{text-align:left;font-weight:600}',
    '#matrix td.m{white-space:normal;font-weight:400}',
    'a{color:inherit}',
    'tr[hidden],section[hidden]{display:none}',
    '#filters{margin:8px 0;padding:6px 8px;background:#f6f8fa;border:1px solid #d0d7de}',
    '#filters label{margin-right:14px;white-space:nowrap}',
    'table.values td:first-child{white-space:nowrap;color:#57606a}',
    'table.checks td:first-child,#checks td:first-child{font-family:ui-monospace,Menlo,Consolas,monospace;'
    'white-space:nowrap}',
    'table.checks td{max-width:560px}',
    '.note{color:#57606a;font-size:13px;margin:4px 0}',
)

# The filters: hidden in the HTML, shown by this script. With scripts off the page is the same minus the filters.
# A filter is also a URL: report.html#status=f,u&check=gpu.health&host=r07 (status letters: f not ready,
# u unreachable, w warnings, p ready); changing a filter rewrites the address bar's fragment that way.
_JS = (
    '(function(){var d=document,F=d.getElementById("filters");if(!F)return;F.hidden=false;',
    'var R=[].slice.call(d.querySelectorAll("#matrix tr[id]")),C=d.getElementById("fc"),Q=d.getElementById("fq"),',
    'N=d.getElementById("fn"),B=[].slice.call(F.querySelectorAll("input[type=checkbox]")),',
    'I=[].map.call(d.querySelectorAll("#matrix th.c"),function(t){return t.title});',
    'function go(){var on={},n=0,i=C.value,q=Q.value.toLowerCase();B.forEach(function(b){on[b.value]=b.checked});',
    'R.forEach(function(r){var c=i===""?null:r.cells[2+ +i],s=d.getElementById("detail-"+r.id.slice(5)),',
    'ok=on[r.className]&&(!q||r.cells[0].textContent.toLowerCase().indexOf(q)>=0)&&',
    '(c===null||(r.className!=="hu"&&(c.className==="f"||c.className==="w")));',
    'r.hidden=!ok;if(s)s.hidden=!ok;if(ok)n++});N.textContent=n+" of "+R.length+" hosts shown"}',
    'function url(){var w=B.filter(function(b){return b.checked}).map(function(b){return b.value.slice(1)});',
    'return "#status="+w.join(",")+(C.value===""?"":"&check="+encodeURIComponent(I[+C.value]))+',
    '(Q.value?"&host="+encodeURIComponent(Q.value):"")}',
    'function user(){go();if(history.replaceState)history.replaceState(null,"",url())}',
    'function read(){var h=location.hash.slice(1),p={},t=null;',
    'try{h.split("&").forEach(function(x){var k=x.indexOf("=");if(k>0)p[x.slice(0,k)]=decodeURIComponent(x.slice(k+1))});',
    'if(h.indexOf("=")<0)t=d.getElementById(decodeURIComponent(h))}catch(e){}',
    'if(p.status!==undefined){var w=p.status.split(",");B.forEach(function(b){b.checked=w.indexOf(b.value.slice(1))>=0})}',
    'if(p.check!==undefined){var k=I.indexOf(p.check);C.value=k<0?"":String(k)}if(p.host!==undefined)Q.value=p.host;',
    'go();if(t&&t.hidden){B.forEach(function(b){b.checked=true});C.value="";Q.value="";go();t.scrollIntoView()}}',
    'F.addEventListener("input",user);F.addEventListener("change",user);',
    '[].slice.call(d.querySelectorAll("a[data-i]")).forEach(function(a){a.addEventListener("click",',
    'function(e){C.value=a.getAttribute("data-i");user();e.preventDefault();F.scrollIntoView()})});',
    'window.addEventListener("hashchange",read);read()})();',
)


def _h(text):
    return _escape(text)


def _check_header(check_id):
    """``gpu.power_limit`` as a two-line header: the area small above, the check below, breakable at ``_``."""
    area, _sep, name = check_id.partition('.')
    if not name:
        area, name = '', area
    return '<span>{0}</span>{1}'.format(_h(area), '_<wbr>'.join(_h(part) for part in name.split('_')))


def anchor(host):
    """The id of a host's row in report.html: ``host-`` and the name, with each UTF-8 byte outside
    ``[A-Za-z0-9._-]`` written ``~xx`` (``~`` too). The same name always gives the same id, two names never give
    one, and the id needs no quoting in a URL: ``report.html#host-gpu-a01``."""
    out = []
    for byte in bytearray(str(host).encode('utf-8')):
        char = chr(byte)
        out.append(char if byte < 128 and (char.isalnum() or char in '._-') else '~{0:02x}'.format(byte))
    return 'host-' + ''.join(out)


def _detail_id(host):
    return 'detail-' + anchor(host)[len('host-'):]


def _badge(css, text):
    return '<span class="b {0}">{1}</span>'.format(css, _h(text))


def _host_links(hosts, limit):
    links = ', '.join('<a href="#{0}">{1}</a>'.format(anchor(host), _h(host)) for host in hosts[:limit])
    if len(hosts) > limit:
        links += ' and {0} more'.format(len(hosts) - limit)
    return links


def render_html(report):
    """One self-contained page (inline CSS and a small script, nothing fetched), readable without the script:
    the counts per host state and per check (with the hosts that failed or warned), filters (status, check,
    host name; shown by the script), the matrix of hosts and checks with the hosts that need attention first,
    then a section per host that needs attention with its checks that did not pass and the values checked.
    Every host's row has the id ``anchor(host)``."""
    ids = report['check_ids']
    order = attention_order(report)
    states = dict((host, host_state(report['hosts'][host])) for host in order)
    counts = dict((state, 0) for state in HOST_STATES)
    for state in states.values():
        counts[state] += 1
    per_check = report.get('by_check') or by_check(report)
    status = report.get('exit_status', exit_status(report))

    out = ['<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           '<title>gpufleet.nodeprep readiness report</title>', '<style>']
    out.extend(_CSS)
    out.extend('.{0}{{color:{1};background:{2}}}'.format(*colour) for colour in _COLOURS)
    out += ['</style>', '</head>', '<body>', '<h1>gpufleet.nodeprep readiness report</h1>']
    out.append('<p id="summary">Generated {0} &middot; {1} hosts: {2} &middot; exit status {3}</p>'.format(
        _h(report['generated']), len(order),
        ' '.join(_badge(_STATE_CLASS[state], '{0} {1}'.format(counts[state], _STATE_WORDS[state]))
                 for state in HOST_STATES),
        status))
    if not order:
        out.append('<p id="nohost">{0}</p>'.format(_badge('u', _h(NO_HOST))))

    # the checks, those that failed on most hosts first
    out.append('<h2>Checks</h2>')
    out.append('<table id="checks"><tr><th>check</th><th>fail</th><th>warn</th><th>skip</th><th>pass</th>'
               '<th>failed on</th><th>warned on</th></tr>')
    ranked = sorted(range(len(ids)), key=lambda i: (-per_check[ids[i]][FAIL], -per_check[ids[i]][WARN], i))
    clean = [i for i in ranked if not (per_check[ids[i]][FAIL] or per_check[ids[i]][WARN] or per_check[ids[i]][SKIP])]
    for index in ranked:
        if index in clean:
            continue
        row = per_check[ids[index]]
        cells = ''.join('<td class="{0}">{1}</td>'.format(
            (_CELLS[s][0] if s in (FAIL, WARN) else '') if row[s] else 'n0', row[s])
            for s in (FAIL, WARN, SKIP, PASS))
        out.append('<tr><td><a href="#hosts" data-i="{0}">{1}</a></td>{2}<td>{3}</td><td>{4}</td></tr>'.format(
            index, _h(ids[index]), cells, _host_links(row['fail_hosts'], SUMMARY_HOSTS),
            _host_links(row['warn_hosts'], SUMMARY_HOSTS)))
    out.append('</table>')
    if clean and order:
        out.append('<p>Passed on every host checked ({0}): {1}</p>'.format(len(clean), ', '.join(
            '<a href="#hosts" data-i="{0}">{1}</a>'.format(i, _h(ids[i])) for i in sorted(clean))))
    unreachable = [host for host in order if states[host] == UNREACHABLE]
    if unreachable:
        out.append('<p>Could not be checked ({0}): {1}</p>'.format(
            len(unreachable), _host_links(unreachable, SUMMARY_HOSTS)))

    # the filters (the script shows them) and the matrix
    out.append('<h2 id="hosts">Hosts</h2>')
    out.append('<form id="filters" hidden>')
    out.append(''.join('<label><input type="checkbox" value="h{0}" checked> {1} ({2})</label>'.format(
        _STATE_CLASS[state], _h(_STATE_WORDS[state]), counts[state]) for state in HOST_STATES))
    out.append('<label>check <select id="fc"><option value="">any</option>' + ''.join(
        '<option value="{0}">{1} failed or warned ({2})</option>'.format(
            i, _h(check_id), per_check[check_id][FAIL] + per_check[check_id][WARN])
        for i, check_id in enumerate(ids)) + '</select></label>')
    out.append('<label>host <input type="search" id="fq" placeholder="name contains"></label> <span id="fn"></span>')
    out.append('</form>')
    out.append('<p class="note">Hosts that need attention first (not ready, unreachable, warnings), then the ready '
               'ones; inventory order within each. Hover a cell for what was observed. The hosts that need attention '
               'have a section below; report.json and report.txt hold every host\'s values.</p>')
    out.append('<table id="matrix">')
    out.append('<tr><th>host</th><th>status</th>' + ''.join(
        '<th class="c" title="{0}">{1}</th>'.format(_h(check_id), _check_header(check_id)) for check_id in ids)
        + '</tr>')
    for host in order:
        entry = report['hosts'][host]
        state = states[host]
        css = _STATE_CLASS[state]
        word = _h(_STATE_WORDS[state])
        if state != PASS:
            word = '<a href="#{0}">{1}</a>'.format(_detail_id(host), word)
        row = ['<tr id="{0}" class="h{1}"><td class="h"><a href="#{0}">{2}</a></td><td class="{1}">{3}</td>'.format(
            anchor(host), css, _h(host), word)]
        if state == UNREACHABLE:
            row.append('<td class="u m" colspan="{0}">{1}</td>'.format(len(ids), _h(entry['msg'])))
        else:
            by_id = dict((c['id'], c) for c in entry['checks'])
            for check_id in ids:
                check = by_id.get(check_id)
                if check is None:
                    row.append('<td class="n" title="not run">-</td>')
                elif check['status'] == PASS:
                    row.append('<td class="p">ok</td>')
                else:
                    cell_css, text = _CELLS.get(check['status'], ('n', check['status']))
                    row.append('<td class="{0}" title="{1}">{2}</td>'.format(
                        cell_css, _h(check['observed']), _h(text)))
        row.append('</tr>')
        out.append(''.join(row))
    out.append('</table>')

    # a section per host that needs attention
    attention = [host for host in order if states[host] != PASS]
    if attention:
        out.append('<h2>Hosts that need attention</h2>')
    for host in attention:
        entry = report['hosts'][host]
        state = states[host]
        out.append('<section id="{0}"><h3><a href="#{1}">{2}</a> {3}</h3>'.format(
            _detail_id(host), anchor(host), _h(host), _badge(_STATE_CLASS[state], _STATE_WORDS[state])))
        if state == UNREACHABLE:
            out.append('<p>{0}</p>'.format(_h(entry['msg'])))
        else:
            out.append(_checks_table([c for c in entry['checks'] if c['status'] != PASS]))
            if entry.get('values'):
                out.append('<details><summary>values checked</summary><table class="values">' + ''.join(
                    '<tr><td>{0}</td><td>{1}</td></tr>'.format(_h(label), _h(text))
                    for label, text in entry['values']) + '</table></details>')
        out.append('</section>')
    out.append('<script>')
    out.extend(_JS)
    out += ['</script>', '</body>', '</html>']
    return '\n'.join(out) + '\n'


def _checks_table(checks):
    rows = ['<table class="checks">', '<tr><th>check</th><th>status</th><th>expected</th><th>observed</th>'
            '<th>remedy</th></tr>']
    for check in checks:
        css = _CELLS.get(check['status'], ('n', ''))[0]
        rows.append('<tr><td>{0}</td><td class="{1}">{2}</td><td>{3}</td><td>{4}</td><td>{5}</td></tr>'.format(
            _h(check['id']), css, _h(check['status']), _h(check['expected']), _h(check['observed']),
            _h(check['remedy'])))
    rows.append('</table>')
    return '\n'.join(rows)


# ---------------------------------------------------------------------------
# readiness.prom: the node_exporter textfile collector's input, on the controller
#
# The format rules (exposition format, data model names, naming practices) and the node's own textfile are
# plugins/module_utils/rules/_readiness_textfile.py; tests/unit/plugins/plugin_utils/test__readiness_report_fleet.py
# checks both line by line and with prometheus_client's parser.  The controller's file is bounded by the number of
# checks, not of nodes: hosts per check and status, hosts per state, the exit status and the time of the run.  What
# each node failed is in that node's own textfile (nodeprep_readiness_node_*, opt-in: nodeprep_readiness_node_textfile).

PROMETHEUS_FAMILIES = (
    ('nodeprep_readiness_checks', 'Hosts per readiness check and status (pass, warn, fail, skip) in the last run; '
                                  'which hosts is in each node\'s textfile (nodeprep_readiness_node_check).'),
    ('nodeprep_readiness_hosts', 'Hosts of the last readiness run per state: ready, not_ready (a check failed or its '
                                 'facts could not be gathered), unreachable.'),
    ('nodeprep_readiness_hosts_not_checked', 'Hosts of the last readiness run whose checks could not run '
                                             '(unreachable, or their facts could not be gathered).'),
    ('nodeprep_readiness_exit_status', 'The readiness run\'s exit status: 0 all hosts ready, 1 some not ready, '
                                       '2 some could not be checked or no host was judged.'),
    ('nodeprep_readiness_last_run_timestamp_seconds', 'When the readiness report was generated, in seconds since '
                                                      'the epoch.'),
)
HOST_STATES_PROM = ('ready', 'not_ready', 'unreachable')


def prometheus_label_value(text):
    """A label value for the text format: backslash, double quote and line feed escaped."""
    return label_value(text)


def _timestamp(generated):
    try:
        return calendar.timegm(time.strptime(str(generated), '%Y-%m-%dT%H:%M:%SZ'))
    except ValueError:
        return None


def render_prometheus(report):
    """readiness.prom: every family is a gauge; per check one sample per status (the number of hosts), per host state
    one sample, the hosts not checked, the exit status and the time of the report: 4 x checks + 6 series at most,
    however many hosts."""
    samples = dict((name, []) for name, _help in PROMETHEUS_FAMILIES)
    per_check = report.get('by_check') or by_check(report)
    for check_id in report['check_ids']:
        row = per_check.get(check_id) or {}
        for status in STATUSES:
            samples['nodeprep_readiness_checks'].append('{{check="{0}",status="{1}"}} {2}'.format(
                prometheus_label_value(check_id), status, row.get(status, 0)))
    summary = report['summary']
    for state in HOST_STATES_PROM:
        samples['nodeprep_readiness_hosts'].append('{{state="{0}"}} {1}'.format(state, summary.get(state, 0)))
    samples['nodeprep_readiness_hosts_not_checked'].append(' {0}'.format(
        sum(1 for host in report['host_order'] if not_checked(report['hosts'][host]))))
    samples['nodeprep_readiness_exit_status'].append(' {0}'.format(report.get('exit_status', exit_status(report))))
    stamp = _timestamp(report['generated'])
    if stamp is not None:
        samples['nodeprep_readiness_last_run_timestamp_seconds'].append(' {0}'.format(stamp))
    return render_families(PROMETHEUS_FAMILIES, samples)


def render_text(report):
    """The plain-text report (report.txt): the matrix, then per host the values checked and what did not pass."""
    lines = [render_matrix(report), '']
    for host in report['host_order']:
        entry = report['hosts'][host]
        lines.append('== {0}: {1}'.format(host, entry['status'].replace('_', ' ')))
        if entry['status'] == UNREACHABLE:
            lines.append('   ' + entry['msg'])
            lines.append('')
            continue
        width = max([len(label) for label, _text in entry.get('values') or []] + [0])
        for label, text in entry.get('values') or []:
            lines.append('   {0}  {1}'.format(label.ljust(width), text))
        for check in entry['checks']:
            if check['status'] == PASS:
                continue
            lines.append('   {0} {1}: {2}'.format(check['status'].upper(), check['id'], check['observed']))
            lines.append('        expected: {0}'.format(check['expected']))
            lines.append('        remedy:   {0}'.format(check['remedy']))
        lines.append('')
    return '\n'.join(lines)


_MATRIX_MARKS = {PASS: '.', WARN: 'W', FAIL: 'F', SKIP: '-', None: ' '}


def render_matrix(report):
    """A compact text matrix for the end of the run: one line per host, one column per check."""
    ids = report['check_ids']
    width = max([len(h) for h in report['host_order']] + [4])
    lines = ['checks: ' + '  '.join('{0}={1}'.format(i + 1, check_id) for i, check_id in enumerate(ids))]
    lines.append('{0}  {1}  {2}'.format('host'.ljust(width), ' '.join('{0:>2}'.format(i + 1)
                                                                      for i in range(len(ids))), 'status'))
    for host in report['host_order']:
        entry = report['hosts'][host]
        if entry['status'] == UNREACHABLE:
            cells = ' '.join(' ?' for dummy in ids)
        else:
            by_id = dict((c['id'], c['status']) for c in entry['checks'])
            cells = ' '.join('{0:>2}'.format(_MATRIX_MARKS.get(by_id.get(i), '?')) for i in ids)
        lines.append('{0}  {1}  {2}'.format(host.ljust(width), cells, entry['status']))
    summary = report['summary']
    lines.append('legend: . pass  W warn  F fail  - skip  ? unreachable; hosts {0}: {1} ready, {2} not ready, '
                 '{3} unreachable'.format(summary['hosts'], summary['ready'], summary['not_ready'],
                                          summary['unreachable']))
    if not report['host_order']:
        lines.append(NO_HOST)
    return '\n'.join(lines)


FILES = (('report.json', render_json), ('junit.xml', render_junit), ('report.html', render_html),
         ('report.txt', lambda report: render_text(report) + '\n'), ('readiness.prom', render_prometheus),
         ('exit-status', render_exit_status))

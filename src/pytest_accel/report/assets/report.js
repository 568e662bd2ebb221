// Sorting and search for the report's tables; the page reads without it.
document.querySelectorAll('table.sortable').forEach(function(table){
  var search=document.getElementById(table.id+'-search');
  if(search){search.classList.remove('hidden');search.addEventListener('input',function(){
    var q=search.value.toLowerCase();
    table.querySelectorAll('tbody tr').forEach(function(r){r.style.display=r.textContent.toLowerCase().indexOf(q)<0?'none':'';});
  });}
  table.querySelectorAll('th').forEach(function(th,col){th.addEventListener('click',function(){
    var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows),up=th.dataset.up!=='1';
    rows.sort(function(a,b){var x=a.cells[col].dataset.v||a.cells[col].textContent,y=b.cells[col].dataset.v||b.cells[col].textContent;
      var nx=parseFloat(x),ny=parseFloat(y);var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);return up?c:-c;});
    th.dataset.up=up?'1':'0';rows.forEach(function(r){body.appendChild(r);});
  });});
});
// How long ago the newest run ended, as of now: the page may be opened days later.
(function(){
  var time=document.querySelector('#made time'),out=document.getElementById('made-ago');
  if(!time||!out){return;}
  var s=(Date.now()-Date.parse(time.getAttribute('datetime')))/1000;
  if(!(s>=0)){return;}
  var units=[[86400,'day'],[3600,'hour'],[60,'minute']];
  for(var i=0;i<units.length;i++){
    var n=Math.floor(s/units[i][0]);
    if(n>=1){out.textContent=' ('+n+' '+units[i][1]+(n>1?'s':'')+' ago)';return;}
  }
  out.textContent=' (just now)';
})();
